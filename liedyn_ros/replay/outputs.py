"""Writing the replay's outputs: a rosbag2 (mcap) bag under /liedyn/... and CSV files.

Messages are built by the pipeline's `OutputMessageFactory` (the one place that builds
them) with rosbags typestore classes. Serializing each of them through rosbags costs about
10 us, so `TemplateEncoder` serializes one factory-built message per layout and then
patches stamp and values into copies of its bytes for a whole block at once; it checks the
patch against a full serialization when it is set up and falls back to plain
serialization if they ever differ. The blocks of bytes go to the bag through
`mcapblock.BlockWriter`, again a block at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

import numpy as np
from rosbags.typesys import Stores

from liedyn_ros import pipeline

from .bagio import standard_typestore
from .csvfmt import format_rows
from .mcapblock import BlockWriter

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from .samples import SampleBlock

PREFIX = "/liedyn/"
NS_PER_S = pipeline.NS_PER_S

Build = Callable[[int, str, "NDArray[np.float64]"], Any]


class TemplateEncoder:
    """CDR bytes for messages that differ only in stamp (header first) and k float64s.

    `build(stamp_ns, frame_id, values)` must return the message; `values` land in k
    float64 slots whose byte offsets are found from a probe message with distinct values.
    """

    def __init__(self, build: Build, serialize: Callable[[Any], bytes], k: int) -> None:
        self.build, self.serialize, self.k = build, serialize, k
        self._layouts: dict[str, tuple[NDArray[np.uint8], NDArray[np.intp]] | None] = {}

    def encode(self, stamps: NDArray[np.int64], frames: tuple[str, ...],
               values: NDArray[np.float64]) -> list[tuple[NDArray[np.intp], NDArray[np.uint8]]]:
        """One serialized message per row of `values` (N, k), grouped by frame id:
        (rows, (len(rows), size) bytes) per frame."""
        distinct = set(frames)
        if len(distinct) == 1:
            return [(np.arange(len(stamps)), self._encode_frame(stamps, frames[0], values))]
        groups = []
        for frame in distinct:
            rows = np.flatnonzero(np.asarray([f == frame for f in frames]))
            groups.append((rows, self._encode_frame(stamps[rows], frame, values[rows])))
        return groups

    def _encode_frame(self, stamps: NDArray[np.int64], frame: str, values: NDArray[np.float64]) -> NDArray[np.uint8]:
        layout = self._layout(frame)
        if layout is None:
            # Stamps and float values never change a CDR size, so the rows stack.
            datas = [self.serialize(self.build(int(s), frame, v)) for s, v in zip(stamps, values)]
            return np.frombuffer(b"".join(datas), dtype=np.uint8).reshape(len(datas), -1)
        template, offsets = layout
        return _patch(template, offsets, stamps, values)

    def _layout(self, frame: str) -> tuple[NDArray[np.uint8], NDArray[np.intp]] | None:
        if frame not in self._layouts:
            self._layouts[frame] = self._probe(frame)
        return self._layouts[frame]

    def _probe(self, frame: str) -> tuple[NDArray[np.uint8], NDArray[np.intp]] | None:
        layout = pipeline.locate_values(lambda stamp_ns, values: self.build(stamp_ns, frame, values), self.serialize,
                                        self.k)
        return None if layout is None else (np.frombuffer(layout.template, dtype=np.uint8).copy(), layout.offsets)


def _patch(
    template: NDArray[np.uint8], offsets: NDArray[np.intp], stamps: NDArray[np.int64], values: NDArray[np.float64]
) -> NDArray[np.uint8]:
    """(N, size) messages: `template` with row i's stamp and values patched in."""
    n, size = len(stamps), len(template)
    buf = np.empty((n, size), dtype=np.uint8)
    buf[:] = template
    sec, nsec = np.divmod(stamps, NS_PER_S)
    buf[:, 4:8] = sec.astype("<i4").view(np.uint8).reshape(n, 4)
    buf[:, 8:12] = nsec.astype("<u4").view(np.uint8).reshape(n, 4)
    vals = np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(n, -1, 8)
    for j, off in enumerate(offsets):
        buf[:, off : off + 8] = vals[:, j]
    return buf


@dataclass(frozen=True)
class Channel:
    """One output: topic, message type, encoder, CSV file and its column names."""

    name: str
    msgtype: str
    columns: tuple[str, ...]
    encoder: TemplateEncoder
    frame: str | None = None  # the header frame id; None: the joint state's


class OutputWriter:
    """Owns DIR/outputs (the mcap bag) and DIR/*.csv for one replay."""

    def __init__(self, out_dir: Path, model: Any, config: pipeline.PipelineConfig) -> None:
        self.out_dir = out_dir
        self.typestore = standard_typestore(Stores.ROS2_HUMBLE)
        self.factory = pipeline.OutputMessageFactory(
            pipeline.MessageClasses.from_typestore(self.typestore), model, config
        )
        self.base_frame = config.base_link or str(getattr(model, "root_link", "base_link"))
        self.contacts = pipeline.resolve_contacts(model, config) if config.contact_links else None
        self.observer = config.external_torque_observer  # false: no /liedyn/external_torque, as live
        self.channels = self._channels(model)
        self.extra_csv = {
            "measured_effort": tuple(model.joint_names),
            "estimated_acceleration": _velocity_columns(model),
        }
        # Contacts or loops: the torques closest to the measurements, the unconstrained ones.
        self.constrained = bool(config.contact_links or config.loop_closures or config.passive_joints)
        if self.constrained:
            self.extra_csv |= {"torque_fit": tuple(model.joint_names),
                               "unconstrained_torque": tuple(model.joint_names)}
        if self.contacts is not None:
            wrench_columns = tuple(f"{link}_{c}" for link in self.contacts.links
                                   for c in ("active", "mx", "my", "mz", "fx", "fy", "fz"))
            self.extra_csv |= {
                "contact_wrench": wrench_columns,     # the configured solution (the node's)
                "contact_wrench_fit": wrench_columns,  # closest to the measurements
            }
        self.counts: dict[str, int] = {c.name: 0 for c in self.channels}
        self._writer: BlockWriter | None = None
        self._connections: dict[str, Any] = {}
        self._csv: dict[str, BinaryIO] = {}

    def _channels(self, model: Any) -> list[Channel]:
        f, ser = self.factory, self._serializer
        joints = tuple(model.joint_names)
        js, jt = "sensor_msgs/msg/JointState", "trajectory_msgs/msg/JointTrajectory"
        channels = [
            Channel(pipeline.TOPIC_FEEDFORWARD, js, joints, TemplateEncoder(
                lambda s, fr, v: f.torque_state(f.header(s, fr), v), ser(js), len(joints))),
            Channel(pipeline.TOPIC_GRAVITY, js, joints, TemplateEncoder(
                lambda s, fr, v: f.torque_state(f.header(s, fr), v), ser(js), len(joints))),
            Channel(pipeline.TOPIC_PREDICTED_ACCELERATION, jt, joints, TemplateEncoder(
                lambda s, fr, v: f.acceleration_trajectory(f.header(s, fr), v), ser(jt), len(joints))),
        ]
        if self.observer:
            channels.append(Channel(pipeline.TOPIC_EXTERNAL_TORQUE, js, joints, TemplateEncoder(
                lambda s, fr, v: f.torque_state(f.header(s, fr), v), ser(js), len(joints))))
        if model.floating_base:
            ws, ac = "geometry_msgs/msg/WrenchStamped", "geometry_msgs/msg/AccelStamped"
            channels += [
                Channel(pipeline.TOPIC_BASE_WRENCH, ws, WRENCH_COLUMNS,
                        TemplateEncoder(lambda s, fr, v: f.wrench(f.header(s, fr), v), ser(ws), 6), self.base_frame),
                Channel(pipeline.TOPIC_BASE_ACCELERATION, ac, ("wdx", "wdy", "wdz", "vdx", "vdy", "vdz"),
                        TemplateEncoder(lambda s, fr, v: f.accel(f.header(s, fr), v), ser(ac), 6), self.base_frame),
            ]
        ws = "geometry_msgs/msg/WrenchStamped"
        for link in () if self.contacts is None else self.contacts.links:
            # The CSV of the contact wrenches is one file for all contacts (extra_csv).
            channels.append(Channel(pipeline.contact_wrench_topic(link), ws, (), TemplateEncoder(
                lambda s, fr, v: f.wrench(f.header(s, fr), v), ser(ws), 6), link))
        return channels

    def _serializer(self, msgtype: str) -> Callable[[Any], bytes]:
        return lambda msg: bytes(self.typestore.serialize_cdr(msg, msgtype))

    def __enter__(self) -> OutputWriter:
        # run.replay has claimed out_dir (outdir.claim): it exists and holds no earlier outputs.
        self._writer = BlockWriter(self.out_dir / "outputs")
        self._writer.open()
        for ch in self.channels:
            self._connections[ch.name] = self._writer.add_connection(
                PREFIX + ch.name, ch.msgtype, typestore=self.typestore
            )
        columns = {c.name: c.columns for c in self.channels if c.columns} | self.extra_csv
        for name, cols in columns.items():
            fh = (self.out_dir / f"{name}.csv").open("wb")
            fh.write((",".join(("stamp_ns",) + cols) + "\n").encode())
            self._csv[name] = fh
        return self

    def __exit__(self, *exc: object) -> None:
        for fh in self._csv.values():
            fh.close()
        if self._writer is not None:
            self._writer.close()

    def write(self, block: SampleBlock, outputs: pipeline.DynamicsOutputs, accel_est: NDArray[np.float64],
              fit: Any = None, tau_ext: NDArray[np.float64] | None = None) -> None:
        """All outputs of one block: bag messages (logged at the input receive time) and CSV;
        ``fit`` (run.ContactFit) the contact forces closest to the measurements; ``tau_ext`` the
        observer's external joint torques (N, n), NaN rows where it has none (no effort)."""
        series = self._series(block, outputs, tau_ext)
        assert self._writer is not None
        for ch in self.channels:
            if ch.name not in series:  # an output the model cannot give (no forward dynamics)
                continue
            values, rows = series[ch.name]
            if not len(rows):
                continue
            conn = self._connections[ch.name]
            frames = _pick(block.frame_id, rows, ch)
            for frame_rows, payloads in ch.encoder.encode(block.stamp_ns[rows], frames, values):
                self._writer.write_block(conn, block.receive_ns[rows[frame_rows]], payloads)
            if ch.name in self._csv:
                self._csv[ch.name].write(format_rows(block.stamp_ns[rows], values))
            self.counts[ch.name] += len(rows)
        self._csv["measured_effort"].write(format_rows(block.stamp_ns, block.effort))
        self._csv["estimated_acceleration"].write(format_rows(block.stamp_ns, accel_est))
        stamps = block.stamp_ns
        if self.constrained and fit is not None and outputs.tau_free is not None:
            self._csv["torque_fit"].write(format_rows(stamps, fit.tau))
            self._csv["unconstrained_torque"].write(format_rows(stamps, outputs.tau_free))
        if self.contacts is not None and outputs.contact_active is not None and fit is not None:
            active = outputs.contact_active
            for name, wrench in (("contact_wrench", outputs.contact_wrench), ("contact_wrench_fit", fit.wrench)):
                table = np.concatenate([active[..., None], wrench], axis=2).reshape(len(block), -1)
                self._csv[name].write(format_rows(stamps, table))

    def _series(self, block: SampleBlock, out: pipeline.DynamicsOutputs, tau_ext: NDArray[np.float64] | None
                ) -> dict[str, tuple[NDArray[np.float64], NDArray[np.intp]]]:
        every = np.arange(len(block))
        series = {
            pipeline.TOPIC_FEEDFORWARD: (out.tau_ff, every),
            pipeline.TOPIC_GRAVITY: (out.tau_g, every),
        }
        for name, values in (
            (pipeline.TOPIC_PREDICTED_ACCELERATION, out.qdd_pred),
            (pipeline.TOPIC_BASE_WRENCH, out.base_wrench),
            (pipeline.TOPIC_BASE_ACCELERATION, out.base_acc_pred),
            (pipeline.TOPIC_EXTERNAL_TORQUE, tau_ext),
        ):
            if values is not None:
                rows = np.flatnonzero(np.isfinite(values).all(axis=1))
                series[name] = (values[rows], rows)
        if self.contacts is not None and out.contact_active is not None and out.contact_wrench is not None:
            at_link = pipeline.wrench_at_link(self.contacts, out.contact_wrench)
            for i, link in enumerate(self.contacts.links):
                rows = np.flatnonzero(out.contact_active[:, i])
                series[pipeline.contact_wrench_topic(link)] = (at_link[rows, i], rows)
        return series


WRENCH_COLUMNS = ("mx", "my", "mz", "fx", "fy", "fz")


def _pick(frames: tuple[str, ...], rows: NDArray[np.intp], ch: Channel) -> tuple[str, ...]:
    """Header frame ids: the joint state's for joint outputs, the channel's own for the others."""
    if ch.frame is not None:
        return (ch.frame,) * len(rows)
    if len(rows) == len(frames):  # every row (rows are increasing): no per-row copy
        return frames
    return tuple(frames[i] for i in rows.tolist())


def _velocity_columns(model: Any) -> tuple[str, ...]:
    base = ("base_wx", "base_wy", "base_wz", "base_vx", "base_vy", "base_vz") if model.floating_base else ()
    return base + tuple(model.joint_names)

