"""A championship's standings and rounds as a file (ChampionshipService.ExportChampionship),
written here once for every client: ``copas championship export`` and the page's download
both ask the server for it, so the format has one implementation (OPERATING.md, "A
tournament director's tools", describes it).

JSON: one object, the championship's id, name, state, scoring options and seed (once over),
``standings`` (``STANDING_COLUMNS`` per line) and ``rounds`` (each with its tables and their
seats). CSV: the same as two tables, a header row each and a blank line between: the
standings, then one row per seat of every round (``SEAT_COLUMNS``). Fractions (a percentage
of 200/3) are written as the nearest double, whole numbers without decimals.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from copas.v1 import championships_pb2 as pb
from copas.v1 import copas_pb2

STATE_TEXT = {pb.CHAMPIONSHIP_STATE_REGISTERING: "registering",
              pb.CHAMPIONSHIP_STATE_RUNNING: "running",
              pb.CHAMPIONSHIP_STATE_FINISHED: "finished",
              pb.CHAMPIONSHIP_STATE_CANCELLED: "cancelled"}
STANDING_COLUMNS = ("place", "name", "player_id", "points", "matchpoints", "percentage",
                    "buchholz", "firsts", "relative_points", "head_to_head", "games",
                    "decided_by", "final_place", "withdrawn", "dropped", "disqualified")
SEAT_COLUMNS = ("round", "final", "announced", "table", "table_id", "end_reason", "corrected",
                "seat", "name", "player_id", "total", "place", "points", "matchpoints",
                "percentage", "left", "no_show")
CSV_TYPE = "text/csv; charset=utf-8"
JSON_TYPE = "application/json"


def _tie_break(value: int) -> str:
    return pb.TieBreak.Name(value).removeprefix("TIE_BREAK_").lower()  # type: ignore[arg-type]


def _end_reason(value: int) -> str:
    if not value:
        return ""
    return copas_pb2.GameEndReason.Name(value).removeprefix(  # type: ignore[arg-type]
        "GAME_END_REASON_")


def export_json(c: pb.Championship) -> dict[str, Any]:
    """The championship as the export writes it: its standings (every tie-break value and
    what decided each place) and each round's pairings and results."""
    return {
        "championship_id": c.championship_id, "name": c.settings.display_name,
        "state": STATE_TEXT.get(c.state, "?"), "rounds_planned": c.settings.rounds,
        "scoring": "matchpoints" if c.settings.scoring == pb.CHAMPIONSHIP_SCORING_MATCHPOINTS
        else "places", "duplicate_deals": c.settings.duplicate_deals,
        "buchholz": c.settings.buchholz, "final_table": c.settings.final_table,
        "seed": c.seed,
        "standings": [
            {"place": s.place, "name": s.display_name, "player_id": s.player_id,
             "points": s.points, "matchpoints": s.matchpoints, "percentage": s.percentage,
             "buchholz": s.buchholz, "firsts": s.firsts, "relative_points": s.relative_points,
             "head_to_head": s.head_to_head, "games": s.games,
             "decided_by": _tie_break(s.decided_by), "final_place": s.final_place,
             "withdrawn": s.has_withdrawn, "dropped": s.is_dropped,
             "disqualified": s.is_disqualified} for s in c.standings],
        "rounds": [
            {"round": r.round_number, "final": r.is_final, "announced": r.is_announced,
             "start_time": r.start_time.ToJsonString() if r.HasField("start_time") else "",
             "tables": [
                 {"table": t.table_number, "table_id": t.table_id,
                  "end_reason": _end_reason(t.end_reason), "corrected": t.is_corrected,
                  "seats": [
                      {"seat": s.seat, "name": s.display_name, "player_id": s.player_id,
                       "total": s.total, "place": s.place, "points": s.points,
                       "matchpoints": s.matchpoints, "percentage": s.percentage,
                       "left": s.has_left, "no_show": s.is_no_show} for s in t.seats]}
                 for t in r.tables]} for r in c.rounds]}


def export_csv(c: pb.Championship) -> str:
    """Two tables, a blank line between: the standings (``STANDING_COLUMNS``), then one row
    per seat of every round (``SEAT_COLUMNS``): its pairing and, once played, its result."""
    data = export_json(c)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(STANDING_COLUMNS)
    for line in data["standings"]:
        writer.writerow([_cell(line[k]) for k in STANDING_COLUMNS])
    writer.writerow([])
    writer.writerow(SEAT_COLUMNS)
    for round_ in data["rounds"]:
        for table in round_["tables"]:
            for seat in table["seats"]:
                row = {"round": round_["round"], "final": round_["final"],
                       "announced": round_["announced"], **{k: table[k] for k in (
                           "table", "table_id", "end_reason", "corrected")}, **seat}
                writer.writerow([_cell(row[k]) for k in SEAT_COLUMNS])
    return out.getvalue()


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value == int(value) else repr(value)
    return str(value)


def export(c: pb.Championship, export_format: int) -> pb.ExportChampionshipResponse:
    """The file in ``export_format`` (JSON, else CSV), with its media type and a name."""
    if export_format == pb.EXPORT_FORMAT_JSON:
        return pb.ExportChampionshipResponse(
            content=json.dumps(export_json(c), indent=2) + "\n", media_type=JSON_TYPE,
            file_name=f"{c.championship_id}-standings.json")
    return pb.ExportChampionshipResponse(content=export_csv(c), media_type=CSV_TYPE,
                                         file_name=f"{c.championship_id}-standings.csv")
