"""The replay's progress bar counts the joint states done, block by block, and stays at the
end: never a lone "0%" that the report then overwrites (issue 25)."""

from __future__ import annotations

import re

from liedyn_ros.replay import ReplayOptions, replay
from test_replay import model, scenario, ur5_urdf, write_bag  # noqa: F401


def test_progress_bar_counts_each_block_and_stays(tmp_path, model, capsys):  # noqa: F811
    sc = scenario(model)
    bag = write_bag(tmp_path / "bag", "mcap", sc)
    total = len(sc["stamps"])
    replay([bag], ReplayOptions(out=tmp_path / "out", urdf=ur5_urdf(), plots=False, chunk_size=256))
    shown = [int(n) for n in re.findall(rf"(\d+)/{total} ", capsys.readouterr().err)]
    assert shown[0] == 0 and shown[-1] == total
    assert len(set(shown)) > 2, f"no progress between the start and the end: {shown}"
