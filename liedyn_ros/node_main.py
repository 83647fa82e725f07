"""The node's console scripts: a stop by Ctrl-C or SIGTERM is quiet and exits 0, at any moment
once this module runs (only the interpreter's own start-up, about 0.1 s, comes before it).

``dynamics_node`` (a plain node, configured and publishing at once) and
``dynamics_lifecycle_node`` (a managed node, rclpy.lifecycle: unconfigured until a lifecycle
manager or ``ros2 lifecycle set`` configures and activates it).

Ctrl-C in a terminal sends SIGINT to ros2 launch and to the node; launch then sends SIGINT
(and after a timeout SIGTERM) itself. rclpy's own handlers turn SIGINT into a KeyboardInterrupt
raised wherever the node happens to be (converting a message, destroying the node) and
SIGTERM into a context shut down under a running callback, each ending in a traceback. Here
the signals only *ask* the node to stop: handlers installed before the heavy imports (rclpy,
numpy, numba: seconds) end an importing process at once, and once the node exists they set a
flag that the spin loop checks between callbacks (within ``POLL_S``). The node then
stops its kernel build, destroys itself and shuts rclpy down, and the process exits 0. This
module imports nothing heavy at the top.
"""
from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import Any, Callable

POLL_S = 0.1  # longest time a stop request waits for the spin loop


class StopSignals:
    """SIGINT and SIGTERM as a request to stop, never as an exception inside running code.

    Until :meth:`arm` (the imports) a signal ends the process at once with exit code 0: nothing
    is running yet that would need stopping. After it, a signal only records itself in
    ``requested``; repeated signals (Ctrl-C and then launch's own SIGINT, SIGTERM) change nothing.
    """

    def __init__(self) -> None:
        self.requested: int | None = None  # the first signal received
        self._armed = False

    @classmethod
    def install(cls) -> StopSignals:
        stop = cls()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, stop._on_signal)
        return stop

    def arm(self) -> None:
        """From now on a signal is a request that the caller polls."""
        self._armed = True

    @staticmethod
    def ignore() -> None:
        """Ignore further signals: the process is ending. (At its exit Python sets its handlers
        back to the default, which would let launch's SIGINT, sent right after a terminal's
        Ctrl-C, kill the interpreter while it finalizes: exit code -2.)"""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.requested is None:
            self.requested = signum
        if not self._armed:  # still importing: nothing to stop but the imports themselves
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(0)


def run(args: list[str] | None, stop: StopSignals, *, managed: bool) -> None:
    """Create the node (the lifecycle node when ``managed``), spin until a stop is requested or
    the context is shut down from elsewhere, then release everything; no exception of a
    stopping node reaches the user."""
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions
    from rclpy.utilities import get_default_context

    from liedyn_ros.dynamics_node import DynamicsNode

    kind: Callable[[], DynamicsNode] = DynamicsNode
    if managed:
        from liedyn_ros.lifecycle_node import LifecycleDynamicsNode

        kind = LifecycleDynamicsNode
    stop.arm()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    context = get_default_context()
    node: DynamicsNode | None = None
    executor = SingleThreadedExecutor(context=context)
    try:
        node = kind()
        executor.add_node(node)
        while stop.requested is None and context.ok():
            executor.spin_once(timeout_sec=POLL_S)
    except ExternalShutdownException:
        pass  # rclpy shut down by someone else in this process: a normal end
    except Exception:
        if stop.requested is None and context.ok():
            raise  # a real failure while running: a traceback and exit code 1, as it should
    finally:
        executor.shutdown(timeout_sec=0.0)
        if node is not None:
            _release(node, managed)
        rclpy.try_shutdown()
        stop.ignore()


def _release(node: Any, managed: bool) -> None:
    """Stop the kernel build and destroy the node; a managed node goes through its shutdown
    transition first, so that a lifecycle manager sees it finalized."""
    try:
        if managed:
            try:
                node.trigger_shutdown()
            except Exception:  # already finalized (or the context gone): nothing to announce
                pass
        node.close()
    finally:
        node.destroy_node()


def main(args: list[str] | None = None) -> None:
    """``dynamics_node``: the plain node."""
    stop = StopSignals.install()
    run(args, stop, managed=False)


def main_lifecycle(args: list[str] | None = None) -> None:
    """``dynamics_lifecycle_node``: the managed node."""
    stop = StopSignals.install()
    run(args, stop, managed=True)


if __name__ == "__main__":
    main()
