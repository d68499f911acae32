"""Accounts without a server: sign-in by device, password and OIDC, sessions that rotate, the
attempt limits, and the operators' calls, on the in-memory store and a fake clock."""

from __future__ import annotations

import asyncio
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from server.accounts.attempts import AttemptRule, SignInAttempts
from server.accounts.credentials import PasswordParameters, Passwords
from server.accounts.model import SESSIONS_KEPT, FinishedGame, MemoryAccountStore, Placed
from server.accounts.oidc import OidcIssuer, OidcVerifier
from server.accounts.ratings import Contender, Rating, rate, rate_game
from server.accounts.service import ACCESS_TTL, GUEST_TTL, REFRESH_GRACE, Accounts
from server.errors import ServiceError
from server.games.hearts.finished import finished_game  # moved behind the game seam
from server.games.hearts.result import GameResult
from server.store.base import RecordSummary, SeatRecord
from server.tokens import hash_token
from tests.helpers.accounts import AUDIENCE, ISSUER, Keys, ManualClock

DEVICE = "d3v1ce-Secret_kept-0nThePhone"
FAST = PasswordParameters(time_cost=1, memory_kib=8, parallelism=1)


def make(keys: Keys | None = None, clock: ManualClock | None = None
         ) -> tuple[Accounts, MemoryAccountStore, ManualClock]:
    clock = clock or ManualClock(1_000_000.0)
    store = MemoryAccountStore()
    verifier = OidcVerifier([OidcIssuer(ISSUER, AUDIENCE, str(keys.path))] if keys else [])
    attempts = SignInAttempts(clock, per_pair=AttemptRule(3, 0.1),
                              per_address=AttemptRule(5, 0.1))
    return Accounts(store, clock, passwords=Passwords(FAST), verifier=verifier,
                    attempts=attempts), store, clock


def reason(error: pytest.ExceptionInfo[ServiceError]) -> str:
    return error.value.reason


async def test_a_device_signs_in_the_same_account_every_time() -> None:
    accounts, _, _ = make()
    first = await accounts.sign_in_device(DEVICE, "Ana")
    again = await accounts.sign_in_device(DEVICE, "Someone else")
    assert first.is_new and not again.is_new
    assert again.account == first.account and again.account.display_name == "Ana"
    assert (await accounts.authenticate(again.access_token)).id == first.account.id
    other = await accounts.sign_in_device("an0ther-Device_secret-XYZ", "Bia")
    assert other.account.id != first.account.id


@pytest.mark.parametrize("secret", ["short", "x" * 129, "not url safe!" * 3, "",
                                    "d" * 22, "ab" * 20, "abcdefg" * 5])
async def test_a_weak_device_secret_is_refused_and_nothing_is_made(secret: str) -> None:
    accounts, store, _ = make()
    with pytest.raises(ServiceError) as error:
        await accounts.sign_in_device(secret, "Ana")
    assert reason(error) == "WEAK_DEVICE_SECRET"
    assert secret not in error.value.message or not secret
    assert len(store) == 0


async def test_the_device_secret_is_kept_only_as_a_digest() -> None:
    accounts, store, _ = make()
    await accounts.sign_in_device(DEVICE, "Ana")
    assert DEVICE not in repr(vars(store))


async def test_a_password_account_signs_in_by_username_case_insensitively() -> None:
    accounts, store, _ = make()
    made = await accounts.sign_up_password("Ana.Silva", "correct horse battery", "Ana")
    signed = await accounts.sign_in_password("ana.silva", "correct horse battery", "1.2.3.4")
    assert signed.account.id == made.account.id and not signed.is_new
    assert "correct horse battery" not in repr(vars(store))  # an argon2id hash only
    with pytest.raises(ServiceError) as error:
        await accounts.sign_up_password("ANA.SILVA", "another password", "")
    assert reason(error) == "IDENTITY_TAKEN"


async def test_a_wrong_password_and_an_unknown_name_get_the_same_answer() -> None:
    accounts, _, _ = make()
    await accounts.sign_up_password("ana", "correct horse battery", "Ana")
    answers = []
    for username in ("ana", "nobody"):
        with pytest.raises(ServiceError) as error:
            await accounts.sign_in_password(username, "wrong password!", "1.2.3.4")
        answers.append((error.value.code, error.value.reason, error.value.message))
    assert answers[0] == answers[1]
    assert answers[0][1] == "INVALID_CREDENTIALS"


@pytest.mark.parametrize(("username", "password", "why"), [
    ("a", "long enough password", "INVALID_USERNAME"),
    ("<b>ana</b>", "long enough password", "INVALID_USERNAME"),
    ("x" * 10_000, "long enough password", "INVALID_USERNAME"),
    ("ana", "short", "WEAK_PASSWORD"),
    ("ana", "p" * 10_000, "WEAK_PASSWORD"),
])
async def test_bad_usernames_and_passwords_are_refused(username: str, password: str,
                                                       why: str) -> None:
    accounts, store, _ = make()
    with pytest.raises(ServiceError) as error:
        await accounts.sign_up_password(username, password, "")
    assert reason(error) == why and password not in error.value.message
    assert len(store) == 0


async def test_failed_passwords_are_limited_per_username_from_one_address() -> None:
    accounts, _, clock = make()
    await accounts.sign_up_password("ana", "correct horse battery", "Ana")
    for n in range(3):
        with pytest.raises(ServiceError) as error:
            await accounts.sign_in_password("ana", f"guess number {n}", "10.0.0.1")
        assert reason(error) == "INVALID_CREDENTIALS"
    with pytest.raises(ServiceError) as error:  # that address: even the right one waits
        await accounts.sign_in_password("ana", "correct horse battery", "10.0.0.1")
    assert reason(error) == "TOO_MANY_SIGN_INS"
    # but only there: the owner is never locked out (issue 37; tests/test_sign_in_protection)
    assert (await accounts.sign_in_password("ana", "correct horse battery", "10.0.0.9")).account
    clock.advance(10.0)  # one failure forgiven
    assert (await accounts.sign_in_password("ana", "correct horse battery", "10.0.0.1")).account


async def test_failed_passwords_are_limited_per_address_across_usernames() -> None:
    accounts, _, _ = make()
    for n in range(5):
        with pytest.raises(ServiceError):
            await accounts.sign_in_password(f"user{n}", "a wrong password", "10.9.9.9")
    with pytest.raises(ServiceError) as error:
        await accounts.sign_in_password("user9", "a wrong password", "10.9.9.9")
    assert reason(error) == "TOO_MANY_SIGN_INS"
    with pytest.raises(ServiceError) as error:  # another address is not held back
        await accounts.sign_in_password("user9", "a wrong password", "10.9.9.8")
    assert reason(error) == "INVALID_CREDENTIALS"


async def test_the_attempt_buckets_are_bounded() -> None:
    clock = ManualClock(0.0)
    attempts = SignInAttempts(clock, max_keys=100)
    for n in range(1_000):
        async with attempts.attempt(f"user{n}", f"addr{n}") as attempt:
            attempt.failed()
    assert attempts.keys_held == 300  # addresses, username-address pairs, usernames


async def test_refresh_rotates_and_a_reused_refresh_token_ends_the_family() -> None:
    accounts, _, _ = make()
    first = await accounts.sign_in_device(DEVICE, "Ana")
    second = await accounts.refresh(first.refresh_token)
    assert second.refresh_token != first.refresh_token
    assert second.access_token != first.access_token
    with pytest.raises(ServiceError) as error:
        await accounts.authenticate(first.access_token)  # the old access token is gone
    assert reason(error) == "SESSION_REVOKED"
    third = await accounts.refresh(second.refresh_token)
    with pytest.raises(ServiceError) as error:
        await accounts.refresh(first.refresh_token)  # stolen and replayed
    assert reason(error) == "SESSION_REVOKED"
    for token in (third.access_token,):
        with pytest.raises(ServiceError):
            await accounts.authenticate(token)
    with pytest.raises(ServiceError):
        await accounts.refresh(third.refresh_token)


async def test_two_refreshes_of_one_token_at_once_get_the_same_tokens() -> None:
    """Two tabs, or a retry after a lost answer: both get the one new pair, and the person
    stays signed in (they used to sign the person out)."""
    accounts, store, _ = make()
    first = await accounts.sign_in_device(DEVICE, "Ana")
    results = await asyncio.gather(accounts.refresh(first.refresh_token),
                                   accounts.refresh(first.refresh_token))
    assert {(r.access_token, r.refresh_token) for r in results} == {
        (results[0].access_token, results[0].refresh_token)}
    assert await store.sessions_of(first.account.id) == 1
    assert (await accounts.authenticate(results[1].access_token)).id == first.account.id
    assert (await accounts.refresh(results[1].refresh_token)).account.id == first.account.id


async def test_a_refresh_token_repeated_after_the_grace_ends_the_session() -> None:
    accounts, _, clock = make()
    first = await accounts.sign_in_device(DEVICE, "Ana")
    second = await accounts.refresh(first.refresh_token)
    clock.advance(REFRESH_GRACE - 1)
    assert (await accounts.refresh(first.refresh_token)).access_token == second.access_token
    clock.advance(2)  # past the grace: a copy of the old token is a theft
    with pytest.raises(ServiceError) as error:
        await accounts.refresh(first.refresh_token)
    assert reason(error) == "SESSION_REVOKED"
    with pytest.raises(ServiceError):
        await accounts.authenticate(second.access_token)


async def test_an_access_token_expires_and_the_refresh_token_renews_it() -> None:
    accounts, _, clock = make()
    first = await accounts.sign_in_device(DEVICE, "Ana")
    clock.advance(ACCESS_TTL + 1)
    with pytest.raises(ServiceError) as error:
        await accounts.authenticate(first.access_token)
    assert reason(error) == "SESSION_EXPIRED"
    renewed = await accounts.refresh(first.refresh_token)
    assert (await accounts.authenticate(renewed.access_token)).id == first.account.id


async def test_sign_out_and_revoke_end_access_and_refresh_at_once() -> None:
    accounts, _, _ = make()
    one = await accounts.sign_in_device(DEVICE, "Ana")
    await accounts.sign_out(hash_token(one.access_token))
    for call in (accounts.authenticate(one.access_token), accounts.refresh(one.refresh_token)):
        with pytest.raises(ServiceError) as error:
            await call
        assert reason(error) == "SESSION_REVOKED"
    a, b = (await accounts.sign_in_device(DEVICE, "Ana"),
            await accounts.sign_in_device(DEVICE, "Ana"))
    assert await accounts.revoke(a.account.id) == 2
    for token in (a.access_token, b.access_token):
        with pytest.raises(ServiceError):
            await accounts.authenticate(token)


async def test_a_banned_account_cannot_sign_in_and_an_unbanned_one_can() -> None:
    accounts, _, _ = make()
    one = await accounts.sign_in_device(DEVICE, "Ana")
    await accounts.set_banned(one.account.id, True)
    with pytest.raises(ServiceError) as error:
        await accounts.sign_in_device(DEVICE, "Ana")
    assert reason(error) == "ACCOUNT_BANNED"
    with pytest.raises(ServiceError):
        await accounts.authenticate(one.access_token)
    await accounts.set_banned(one.account.id, False)
    assert (await accounts.sign_in_device(DEVICE, "Ana")).account.id == one.account.id


async def test_a_guest_links_a_password_and_keeps_the_account() -> None:
    accounts, _, _ = make()
    guest = await accounts.sign_in_device(DEVICE, "Ana")
    await accounts.link_password(guest.account, "ana", "correct horse battery")
    signed = await accounts.sign_in_password("ana", "correct horse battery", "1.2.3.4")
    assert signed.account.id == guest.account.id
    other = await accounts.sign_in_device("th1rd-Device_secret-QRSTU", "Bia")
    with pytest.raises(ServiceError) as error:
        await accounts.link_password(other.account, "ANA", "another long password")
    assert reason(error) == "IDENTITY_TAKEN"


async def test_a_deleted_account_is_forgotten() -> None:
    accounts, _, _ = make()
    one = await accounts.sign_in_device(DEVICE, "Ana")
    await accounts.delete(one.account.id)
    with pytest.raises(ServiceError) as error:
        await accounts.find(one.account.id)
    assert reason(error) == "ACCOUNT_NOT_FOUND"
    again = await accounts.sign_in_device(DEVICE, "Ana")  # the device starts afresh
    assert again.is_new and again.account.id != one.account.id


async def test_an_oidc_id_token_maps_issuer_and_subject_to_one_account(keys: Keys) -> None:
    accounts, _, _ = make(keys)
    first = await accounts.sign_in_oidc(keys.token(), "")
    again = await accounts.sign_in_oidc(keys.token(name="Changed"), "")
    assert first.is_new and first.account.display_name == "Ana"
    assert again.account.id == first.account.id
    other = await accounts.sign_in_oidc(keys.token(sub="person-2"), "")
    assert other.account.id != first.account.id


async def test_a_guest_links_an_oidc_identity(keys: Keys) -> None:
    accounts, _, _ = make(keys)
    guest = await accounts.sign_in_device(DEVICE, "Ana")
    await accounts.link_oidc(guest.account, keys.token(sub="linked"))
    assert (await accounts.sign_in_oidc(keys.token(sub="linked"), "")).account.id \
        == guest.account.id


def _forged(keys: Keys) -> dict[str, str]:
    now = int(time.time())
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    base = {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "iat": now, "exp": now + 300}
    return {
        "expired": keys.token(exp=now - 3600, iat=now - 7200),
        "not yet valid": keys.token(nbf=now + 3600),
        "other audience": keys.token(aud="someone-else"),
        "foreign key": jwt.encode(base, other, algorithm="RS256", headers={"kid": "k1"}),
        "shared secret": jwt.encode(base, "secret", algorithm="HS256", headers={"kid": "k1"}),
        "unsigned": jwt.encode(base, None, algorithm="none"),
        "no subject": jwt.encode({k: v for k, v in base.items() if k != "sub"},
                                 keys.private, algorithm="RS256", headers={"kid": "k1"}),
        "garbage": "not.a.jwt",
        "huge": "a" * 20_000,
        "unknown kid": jwt.encode(base, keys.private, algorithm="RS256",
                                  headers={"kid": "nope"}),
    }


async def test_bad_id_tokens_are_refused_and_nothing_is_made(keys: Keys) -> None:
    accounts, store, _ = make(keys)
    for why, token in _forged(keys).items():
        with pytest.raises(ServiceError) as error:
            await accounts.sign_in_oidc(token, "")
        assert reason(error) == "INVALID_ID_TOKEN", why
        assert token not in error.value.message
    now = int(time.time())
    foreign = jwt.encode({"iss": "https://evil.test", "aud": AUDIENCE, "sub": "x",
                          "iat": now, "exp": now + 60}, keys.private, algorithm="RS256")
    with pytest.raises(ServiceError) as error:
        await accounts.sign_in_oidc(foreign, "")
    assert reason(error) == "UNKNOWN_ISSUER"
    assert len(store) == 0


def test_an_issuer_flag_is_parsed_or_refused() -> None:
    assert OidcIssuer.parse("https://a.test=web=/etc/jwks.json") == OidcIssuer(
        "https://a.test", "web", "/etc/jwks.json")
    with pytest.raises(ValueError):
        OidcIssuer.parse("https://a.test=web")


def test_ratings_follow_places_and_ties_share() -> None:
    start = [Rating()] * 4
    after = rate(start, [1, 2, 2, 4])
    assert after[0].mu > after[1].mu == after[2].mu > after[3].mu
    assert [r.games for r in after] == [1, 1, 1, 1] and [r.wins for r in after] == [1, 0, 0, 0]
    assert Rating().shown == 0 and after[0].shown > 0
    again = rate(after, [4, 3, 2, 1])
    assert again[3].mu > after[3].mu and again[0].mu < after[0].mu
    with pytest.raises(ValueError):
        rate([Rating()], [1])


def _summary(accounts: list[str], places: list[int], *, end: str = "POINT_LIMIT",
             bots: int = 0, rating: str = "people", own: list[int] | None = None,
             networks: list[str] | None = None) -> RecordSummary:
    """A finished game of 13 cards a seat; ``own``: the cards each seat's person played
    (default: all of them)."""
    from engine import GameEndReason, Rules, Standing

    seats = tuple(SeatRecord(n, f"P{n}", n >= len(accounts), a, True,
                             (own or [13] * 5)[n], 13, (networks or [""] * 5)[n])
                  for n, a in enumerate(accounts + [""] * bots))
    standings = tuple(Standing(n, p, 10 * p, False) for n, p in enumerate(places))
    result = GameResult(True, GameEndReason(end), tuple(10 * p for p in places), (), (),
                        standings)
    return RecordSummary("r1", "t1", "Ana's table", "online", 1.0, 2.0, 7,
                         Rules.preset("online"), seats, result, rating)


def test_a_game_of_signed_in_people_is_rated_with_its_places() -> None:
    game = finished_game(_summary(["a1", "a2", "a3", "a4"], [2, 1, 2, 4]))
    assert game is not None and game.is_rated and game.players == 4
    assert [(p.account_id, p.place, p.points) for p in game.places] == [
        ("a1", 2, 20), ("a2", 1, 10), ("a3", 2, 20), ("a4", 4, 40)]


@pytest.mark.parametrize(("accounts", "bots", "end"), [
    (["a1", "a2", "a3"], 1, "POINT_LIMIT"),  # a bot seat
    (["a1", "a2", "a3", ""], 0, "POINT_LIMIT"),  # an anonymous person
    (["a1", "a2", "a3", "a4"], 0, "CLOSED"),  # an operator ended it
])
def test_other_games_are_kept_unrated(accounts: list[str], bots: int, end: str) -> None:
    game = finished_game(_summary(accounts, [1, 2, 3, 4], end=end, bots=bots))
    assert game is not None and not game.is_rated
    assert {p.account_id for p in game.places} == {a for a in accounts if a}


def test_a_game_without_accounts_is_no_accounts_business() -> None:
    assert finished_game(_summary(["", "", ""], [1, 2, 3], bots=1)) is None


def test_an_abandoned_game_is_rated_with_the_leavers_last() -> None:
    game = finished_game(_summary(["a1", "a2", "a3", "a4"], [1, 2, 4, 3], end="ABANDONED"))
    assert game is not None and game.is_rated
    assert [p.place for p in game.places] == [1, 2, 4, 3]


def test_a_game_with_a_bot_is_never_rated_whatever_its_table_asked() -> None:
    """A farm of one person and bots (or of a person's own accounts and bots) earns nothing:
    "with_bots" is still accepted from older clients and rates nothing."""
    for rating in ("with_bots", "people"):
        game = finished_game(_summary(["a1", "a2"], [3, 1, 2, 4], bots=2, rating=rating))
        assert game is not None and not game.is_rated


def test_a_table_rated_off_is_never_rated() -> None:
    game = finished_game(_summary(["a1", "a2", "a3", "a4"], [1, 2, 3, 4], rating="off"))
    assert game is not None and not game.is_rated


def _contenders(places: list[int], played: list[bool], games: list[int] | None = None,
                networks: list[str] | None = None) -> list[Contender]:
    return [Contender(n, p, played[n], (networks or [""] * 5)[n],
                      Rating(games=(games or [0] * 5)[n]))
            for n, p in enumerate(places)]


def test_a_game_nobody_played_moves_nobodys_rating() -> None:
    """The farm of one person and three guests who leave (or time out) at once: the game
    ends, nobody but the winner played, and nothing is rated."""
    game = finished_game(_summary(["main", "g1", "g2", "g3"], [1, 2, 3, 4],
                                  end="LAST_PLAYER", own=[0, 0, 0, 0]))
    assert game is not None and not game.is_rated
    assert rate_game(_contenders([1, 2, 3, 4], [True, False, False, False])) == []
    # Played a card or two, then left: under half of their cards is not playing.
    game = finished_game(_summary(["main", "g1", "g2", "g3"], [1, 2, 3, 4], own=[13, 6, 1, 0]))
    assert game is not None and not game.is_rated


def test_seats_that_played_rate_each_other_and_a_leaver_loses_but_gives_nothing() -> None:
    updates = {u.seat: u for u in rate_game(_contenders([2, 1, 4, 3],
                                                         [True, True, False, True]))}
    assert sorted(updates) == [0, 1, 2, 3]
    for seat in (0, 1, 3):  # rated among the three who played
        assert updates[seat].opponents == tuple(s for s in (0, 1, 3) if s != seat)
    assert updates[2].opponents == (0, 1, 3)  # the leaver, against all who played
    assert updates[2].after.mu < updates[2].before.mu and updates[2].after.wins == 0
    alone = rate([Rating()] * 3, [2, 1, 3])  # the three as if the leaver was never there
    assert [updates[s].after.mu for s in (0, 1, 3)] == pytest.approx([r.mu for r in alone])


def test_new_accounts_cannot_feed_an_established_one() -> None:
    updates = {u.seat: u for u in rate_game(_contenders(
        [1, 2, 3, 4], [True] * 4, games=[12, 0, 0, 11]))}
    assert updates[0].opponents == (3,) and updates[3].opponents == (0,)
    assert updates[1].opponents == (0, 2, 3)  # a provisional one is rated against all
    solo = rate_game(_contenders([1, 2, 3, 4], [True] * 4, games=[12, 0, 0, 0]))
    assert 0 not in {u.seat for u in solo}  # no established opponent: not rated at all


def test_people_of_one_network_count_for_nobody() -> None:
    """One person's accounts (or a household's) at one table never count: they are nobody's
    opponents, whoever they play (three alts of one address could feed a fourth account of
    another network: the attacker's farm of issue 37's review)."""
    nets = ["home", "home", "cafe", ""]
    updates = {u.seat: u for u in rate_game(_contenders([1, 2, 3, 4], [True] * 4,
                                                        networks=nets))}
    assert updates[0].opponents == (2, 3) and updates[1].opponents == (2, 3)
    assert updates[2].opponents == (3,) and updates[3].opponents == (2,)
    farm = rate_game(_contenders([1, 2, 3, 4], [True] * 4,
                                 networks=["main", "alts", "alts", "alts"]))
    assert [u.seat for u in farm] == []  # the main account has nobody to beat
    two = rate_game(_contenders([1, 2], [True, True], networks=["home", "home"]))
    assert two == []  # two accounts of one device (one network): nothing moves
    allowed = rate_game(_contenders([1, 2], [True, True], networks=["home", "home"]),
                        is_one_network_rated=True)
    assert [u.opponents for u in allowed] == [(1,), (0,)]


def test_a_seat_that_left_loses_and_gives_nothing_whatever_it_played() -> None:
    """Three guests play seven cards each and leave (the game ends at once): they played,
    but they left, so the stayer gains nothing; they lose against nobody either."""
    contenders = [Contender(n, n + 1, True, f"net{n}", Rating(), has_left=n > 0)
                  for n in range(4)]
    assert rate_game(contenders) == []  # one seat stayed: nothing is rated
    contenders[1] = Contender(1, 2, True, "net1", Rating())  # two stayed
    updates = {u.seat: u for u in rate_game(contenders)}
    assert updates[0].opponents == (1,) and updates[1].opponents == (0,)
    assert updates[2].opponents == (0, 1) and updates[2].after.mu < updates[2].before.mu


async def test_one_device_signing_in_again_and_again_holds_a_bounded_number_of_sessions(
        ) -> None:
    accounts, store, clock = make()
    first = await accounts.sign_in_device(DEVICE, "Ana")
    for _ in range(3 * SESSIONS_KEPT):
        clock.advance(1)
        last = await accounts.sign_in_device(DEVICE, "")
    assert await store.sessions_of(first.account.id) == SESSIONS_KEPT
    with pytest.raises(ServiceError) as error:
        await accounts.authenticate(first.access_token)  # the oldest ended first
    assert reason(error) == "SESSION_REVOKED"
    assert (await accounts.authenticate(last.access_token)).id == first.account.id


async def test_a_guest_never_used_goes_after_its_time_and_one_who_played_stays() -> None:
    accounts, store, clock = make()
    idle = await accounts.sign_in_device(DEVICE, "Idle")
    player = await accounts.sign_in_device("an0ther-Device_secret-XYZ", "Player One")
    rival = await accounts.sign_in_device("th1rd-Device_secret-QRSTU", "Rival Two")
    await accounts.game_finished(FinishedGame("g1", "t", clock(), 4, (
        Placed(player.account.id, 1, 0, 0, True, "n0"),
        Placed(rival.account.id, 2, 9, 1, True, "n1")), True))  # a rated game: they stay
    clock.advance(GUEST_TTL - 10)
    assert await accounts.sweep() == (0, 0)
    clock.advance(20)  # the refresh tokens (30 days) and the guest's time are both past
    assert await accounts.sweep() == (3, 1)
    assert await store.account(idle.account.id) is None
    assert await store.account(player.account.id) is not None
    again = await accounts.sign_in_device(DEVICE, "Idle")  # the device makes a new one
    assert again.is_new and again.account.id != idle.account.id


async def test_a_copied_refresh_token_is_caught_from_another_network_or_a_second_time(
        ) -> None:
    """The grace answers one repeat, from the network that rotated: a thief who copied the
    refresh token and presents it after the owner's refresh, from elsewhere, ends the session
    (the review's thief stayed in step over four rotations)."""
    accounts, _, clock = make()
    first = await accounts.sign_in_device(DEVICE, "Ana")
    owner = await accounts.refresh(first.refresh_token, "198.51.100.7")
    clock.advance(1)
    with pytest.raises(ServiceError) as error:
        await accounts.refresh(first.refresh_token, "203.0.113.9")  # the thief, elsewhere
    assert reason(error) == "SESSION_REVOKED"
    with pytest.raises(ServiceError):
        await accounts.authenticate(owner.access_token)  # the whole session ended
    again = await accounts.sign_in_device(DEVICE, "")
    renewed = await accounts.refresh(again.refresh_token, "198.51.100.7")
    repeated = await accounts.refresh(again.refresh_token, "198.51.100.7")  # a second tab
    assert repeated.access_token == renewed.access_token
    with pytest.raises(ServiceError) as error:
        await accounts.refresh(again.refresh_token, "198.51.100.7")  # a third copy: a thief's
    assert reason(error) == "SESSION_REVOKED"



async def test_the_intake_at_start_reaches_back_from_the_newest_record_not_from_now() -> None:
    """A node started long after its last game (down for a day after a crash, or started on
    a backup restored days later) still takes the games that ended just before: the start's
    catch-up covers the window before the newest record, not only the window before now."""
    from server.accounts.games import GameIntake

    class Summary:
        def __init__(self, record_id: str, finished: float) -> None:
            self.record_id, self.finished = record_id, finished

    class Records:
        """Records newest first, as a store lists them."""

        def __init__(self, *summaries: Summary) -> None:
            self.rows = sorted(summaries, key=lambda s: (-s.finished, s.record_id))

        def list_records(self, limit: int, before: tuple[float, str] | None) -> list[Summary]:
            return [r for r in self.rows if before is None
                    or (-r.finished, r.record_id) > (-before[0], before[1])][:limit]

    class Taking(GameIntake):
        """Notes what it takes instead of taking it into accounts."""

        def __init__(self, records: Records, now: float) -> None:
            super().__init__(None, records, window=3600.0, clock=lambda: now)  # type: ignore
            self.taken: list[str] = []

        async def take(self, summary: object) -> bool:
            self.taken.append(summary.record_id)  # type: ignore[attr-defined]
            return True

    backup = 1_000_000.0  # the newest record's end: a game just before a backup
    records = Records(Summary("long_before", backup - 7200.0),
                      *(Summary(f"r{n}", backup - n) for n in range(150)))
    restored_later = Taking(records, now=backup + 3 * 86400)
    assert await restored_later.catch_up() == 150
    assert restored_later.taken == [f"r{n}" for n in reversed(range(150))]  # oldest first
    at_once = Taking(records, now=backup + 1)
    assert await at_once.catch_up() == 150 and at_once.taken == restored_later.taken
