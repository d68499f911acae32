"""The bots' inner loop: the duck rule on bitmasks, dealing the unseen cards consistently
with what a seat knows, and playing a hand out to its end.

Compiled with mypyc at install (setup.py) next to ``engine/game.py``, so it is written with
plain ints and lists; the pure-Python module is the same source. Legality is the engine's
own ``legal_play_mask``. A small xorshift generator (state in 32 bits) keeps every playout
reproducible from a seed without calling back into ``random``.
"""

from __future__ import annotations

from typing import Final

from engine.game import legal_play_mask

QUEEN: Final = 36  # Q♠
QUEEN_BIT: Final = 1 << 36
HEARTS: Final = 0x1FFF << 39
NOT_POINTS: Final = ~(HEARTS | QUEEN_BIT)
MASK32: Final = 0xFFFFFFFF
# Moon rules as ints: what a hand in which one seat took all 26 points scores.
MOON_OTHERS_PLUS_26: Final = 0
MOON_DISABLED: Final = 2


def next_random(state: int) -> int:
    """xorshift32: the next state (never 0 from a non-zero state)."""
    state ^= (state << 13) & MASK32
    state ^= state >> 17
    state ^= (state << 5) & MASK32
    return state


def seed_state(seed: int) -> int:
    state = (seed * 2654435761 + 0x9E3779B9) & MASK32
    return state or 0x6D2B79F5


def top_card(mask: int) -> int:
    """The highest-ranked card of a non-empty mask; rank ties go to the later suit."""
    best = -1
    best_rank = -1
    for suit in range(4):
        block = (mask >> (13 * suit)) & 0x1FFF
        if block:
            rank = block.bit_length() - 1
            if rank >= best_rank:
                best_rank = rank
                best = suit * 13 + rank
    return best


def bottom_card(mask: int) -> int:
    """The lowest-ranked card of a non-empty mask; rank ties go to the earlier suit."""
    best = -1
    best_rank = 99
    for suit in range(4):
        block = (mask >> (13 * suit)) & 0x1FFF
        if block:
            rank = (block & -block).bit_length() - 1
            if rank < best_rank:
                best_rank = rank
                best = suit * 13 + rank
    return best


def duck_card(legal: int, led_suit: int, best: int, trick_points: int, is_last: bool) -> int:
    """The duck rule (docs in ai/policies.py): ``best`` is the winning card of the trick in
    progress (-1 when leading), ``led_suit`` -1 when leading."""
    if led_suit < 0:
        # Lead the lowest card, a non-heart on ties.
        card = bottom_card(legal & ~HEARTS)
        if card < 0:
            return bottom_card(legal)
        heart = bottom_card(legal & HEARTS)
        if heart >= 0 and heart % 13 < card % 13:
            return heart
        return card
    suit_block = (legal >> (13 * led_suit)) & 0x1FFF
    if suit_block:
        below = suit_block & ((1 << (best % 13)) - 1)
        if below:
            return led_suit * 13 + below.bit_length() - 1
        following = legal & (0x1FFF << (13 * led_suit))
        safe = following & ~QUEEN_BIT
        if not safe:
            return QUEEN
        if is_last and trick_points == 0:
            return top_card(safe)
        return bottom_card(safe)
    if legal & QUEEN_BIT:
        return QUEEN
    if legal & HEARTS:
        return top_card(legal & HEARTS)
    return top_card(legal)


def shoot_card(legal: int, led_suit: int, best: int) -> int:
    """A seat going for the moon: lead high, win what it can, else throw its lowest card
    without points."""
    if led_suit < 0:
        return top_card(legal)
    suit_block = (legal >> (13 * led_suit)) & 0x1FFF
    if suit_block:
        if suit_block >> (best % 13 + 1):
            return led_suit * 13 + suit_block.bit_length() - 1
        return bottom_card(legal)
    safe = legal & NOT_POINTS
    return bottom_card(safe if safe else legal)


def play_out(hands: list[int], trick: list[int], leader: int, trick_number: int,
             hearts_broken: bool, taken: list[int], players: int, opening: int,
             no_points_first: bool, queen_breaks: bool, shooter: int) -> list[int]:
    """Play the hand to its end with the duck rule (``shooter``, if >= 0, goes for the
    moon); ``hands`` and ``taken`` are changed in place and ``taken`` is returned."""
    count = len(trick)
    led = trick[0] // 13 if count else -1
    best = -1
    winner = leader
    points = 0
    for i in range(count):
        c = trick[i]
        points += 13 if c == QUEEN else (1 if c >= 39 else 0)
        if c // 13 == led and c > best:
            best = c
            winner = (leader + i) % players
    seat = (leader + count) % players
    while True:
        hand = hands[seat]
        if not hand:
            break
        legal = legal_play_mask(hand, led, trick_number, hearts_broken, opening, no_points_first)
        if seat == shooter:
            card = shoot_card(legal, led, best)
        else:
            card = duck_card(legal, led, best, points, count == players - 1)
        hands[seat] = hand & ~(1 << card)
        if card >= 39 or (card == QUEEN and queen_breaks):
            hearts_broken = True
        if count == 0:
            led = card // 13
            best = card
            winner = seat
            points = 0
        elif card // 13 == led and card > best:
            best = card
            winner = seat
        points += 13 if card == QUEEN else (1 if card >= 39 else 0)
        count += 1
        if count == players:
            taken[winner] += points
            trick_number += 1
            count = 0
            led = -1
            best = -1
            points = 0
            seat = winner
        else:
            seat = (seat + 1) % players
    return taken


def hand_score(taken: list[int], seat: int, moon: int) -> int:
    """``seat``'s points for the hand: what it took, or the moon's 0 / 26."""
    if moon != MOON_DISABLED:
        for s in range(len(taken)):
            if taken[s] == 26:
                return 0 if s == seat else 26
    return taken[seat]


def deal_unseen(state: int, unseen: int, need: list[int], voids: list[int], fixed: list[int]
                ) -> tuple[int, list[int]]:
    """Deal the ``unseen`` cards to the seats that need them (``need[s]`` cards each, none of
    a suit in ``voids[s]``), on top of the cards known to be there (``fixed``). Returns the
    generator's new state and the hands. After a few dead ends, voids are ignored."""
    cards: list[int] = []
    mask = unseen
    while mask:
        low = mask & -mask
        cards.append(low.bit_length() - 1)
        mask ^= low
    players = len(need)
    for attempt in range(12):
        for i in range(len(cards) - 1, 0, -1):
            state = next_random(state)
            j = state % (i + 1)
            cards[i], cards[j] = cards[j], cards[i]
        hands = list(fixed)
        left = list(need)
        ok = True
        for c in cards:
            suit_bit = 1 << (c // 13)
            total = 0
            for s in range(players):
                if left[s] and (attempt >= 10 or not voids[s] & suit_bit):
                    total += left[s]
            if not total:
                ok = False
                break
            state = next_random(state)
            r = state % total
            for s in range(players):
                if left[s] and (attempt >= 10 or not voids[s] & suit_bit):
                    if r < left[s]:
                        hands[s] |= 1 << c
                        left[s] -= 1
                        break
                    r -= left[s]
        if ok:
            return state, hands
    return state, list(fixed)


def evaluate_plays(seat: int, candidates: list[int], own_hand: int, unseen: int,
                   need: list[int], voids: list[int], fixed: list[int], trick: list[int],
                   leader: int, trick_number: int, hearts_broken: bool, taken: list[int],
                   opening: int, no_points_first: bool, queen_breaks: bool, moon: int,
                   try_moon: bool, samples: int, seed: int) -> list[int]:
    """Determinized Monte Carlo: for ``samples`` deals of the unseen cards, play each
    candidate card and the rest of the hand out; return each candidate's total points for
    ``seat`` (lower is better). With ``try_moon``, each candidate is also played out with
    ``seat`` going for the moon, and the better of the two plans counts, deal by deal."""
    players = len(need)
    totals = [0] * len(candidates)
    state = seed_state(seed)
    for _ in range(samples):
        state, dealt = deal_unseen(state, unseen, need, voids, fixed)
        dealt[seat] = own_hand
        for k in range(len(candidates)):
            card = candidates[k]
            score = _after(dealt, card, seat, trick, leader, trick_number, hearts_broken, taken,
                           players, opening, no_points_first, queen_breaks, moon, -1)
            if try_moon:
                shot = _after(dealt, card, seat, trick, leader, trick_number, hearts_broken,
                              taken, players, opening, no_points_first, queen_breaks, moon, seat)
                score = min(score, shot)
            totals[k] += score
    return totals


def _after(dealt: list[int], card: int, seat: int, trick: list[int], leader: int,
           trick_number: int, hearts_broken: bool, taken: list[int], players: int,
           opening: int, no_points_first: bool, queen_breaks: bool, moon: int,
           shooter: int) -> int:
    """``seat`` plays ``card`` into the trick, then everyone plays the hand out."""
    hands = list(dealt)
    hands[seat] &= ~(1 << card)
    now = list(trick)
    now.append(card)
    if card >= 39 or (card == QUEEN and queen_breaks):
        hearts_broken = True
    points = list(taken)
    if len(now) == players:
        led = now[0] // 13
        best = now[0]
        winner = leader
        won = 0
        for i in range(players):
            c = now[i]
            won += 13 if c == QUEEN else (1 if c >= 39 else 0)
            if c // 13 == led and c > best:
                best = c
                winner = (leader + i) % players
        points[winner] += won
        play_out(hands, [], winner, trick_number + 1, hearts_broken, points, players, opening,
                 no_points_first, queen_breaks, shooter)
    else:
        play_out(hands, now, leader, trick_number, hearts_broken, points, players, opening,
                 no_points_first, queen_breaks, shooter)
    return hand_score(points, seat, moon)


def evaluate_passes(seat: int, hand: int, passes: list[int], target: int, unseen: int,
                    players: int, hand_size: int, opening: int, no_points_first: bool,
                    queen_breaks: bool, moon: int, samples: int, seed: int) -> list[int]:
    """Each candidate pass (a 3-card mask) scored over ``samples`` deals of the other hands:
    the others pass with the duck pass rule, the hand is played out with the duck rule;
    totals of ``seat``'s points (lower is better)."""
    totals = [0] * len(passes)
    state = seed_state(seed)
    need = [hand_size] * players
    need[seat] = 0
    no_voids = [0] * players
    empty = [0] * players
    for _ in range(samples):
        state, dealt = deal_unseen(state, unseen, need, no_voids, empty)
        their_pass = [duck_pass(dealt[s]) if s != seat else 0 for s in range(players)]
        for k in range(len(passes)):
            hands = list(dealt)
            hands[seat] = hand
            chosen = list(their_pass)
            chosen[seat] = passes[k]
            for s in range(players):
                hands[s] &= ~chosen[s]
            offset = (target - seat) % players
            for s in range(players):
                hands[(s + offset) % players] |= chosen[s]
            leader = 0
            for s in range(players):
                if hands[s] >> opening & 1:
                    leader = s
            taken = play_out(hands, [], leader, 0, False, [0] * players, players, opening,
                             no_points_first, queen_breaks, -1)
            totals[k] += hand_score(taken, seat, moon)
    return totals


def pass_danger(card: int) -> int:
    """The duck pass order: A♠, K♠, Q♠ first, then by rank with a heart 5 ranks higher
    (ties: the later suit first)."""
    if card == 38:
        return 1000
    if card == 37:
        return 999
    if card == QUEEN:
        return 998
    rank = card % 13 + (5 if card >= 39 else 0)
    return rank * 4 + card // 13


def duck_pass(hand: int) -> int:
    """The duck pass: the three most dangerous cards (a mask)."""
    chosen = 0
    for _ in range(3):
        best = -1
        best_danger = -1
        mask = hand & ~chosen
        while mask:
            low = mask & -mask
            c = low.bit_length() - 1
            danger = pass_danger(c)
            if danger > best_danger:
                best_danger = danger
                best = c
            mask ^= low
        if best >= 0:
            chosen |= 1 << best
    return chosen
