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

The spin loop is :class:`LeanSpin`, not rclpy's executor, which builds a new wait set and a task
per callback: at 1 kHz that general machinery was half of the node's CPU time.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType
from typing import Any, Callable

POLL_S = 0.1  # longest time a stop request waits for the spin loop
EVENTS_S = 0.1  # QoS events are waited for at most this often (LeanSpin)
COMPANION_TAKES = 16  # messages taken from one companion subscription per wake-up, at most (LeanSpin)


class LeanSpin:
    """One thread over one rclpy wait set of all the node's entities, made again only when they
    change (a model rebuild rewires subscriptions, a lifecycle transition creates or destroys
    them). A ready subscription's message is taken and handed to its callback, a ready timer
    called, here and at once, the sample subscription (``node.joint_state_subscription``) last,
    so that a joint state pairs with the odometry and contact state that came with it. Anything
    else that is ready (a service: parameters, lifecycle transitions, type descriptions; a QoS
    event; a guard condition, triggered again since this wait consumed its trigger) is left
    pending and handed to rclpy's ``executor``, which takes it the general way: every feature
    of the node stays, the samples skip the general machinery.

    The QoS events (rclpy waitables: the event handlers rclpy gives a subscription or publisher
    made with its default callbacks) are waited for at most every ``EVENTS_S``: each costs a
    Python call to add and one to ask at every wake-up (the contact node had 22 of them). An event
    stays pending in the middleware until it is waited for, so it is handled at most ``EVENTS_S`` +
    ``POLL_S`` late. (The services stay in every wait: waited for only every ``EVENTS_S`` too, a
    parameter request took 76 ms at the median and up to 0.4 s while joint states came at 1 kHz, in
    one run at load 5.7, against 3-7 ms and at most 11 ms in every wait.)

    The wait set is made again only when the node's entities changed: rclpy calls its executor's
    ``wake()`` whenever a node creates or destroys one, and the loop notes that call (comparing the
    node's entities at every wake-up cost more than the rest of the loop's Python). The node must be
    added to ``executor`` first.

    The node's ``companion_subscriptions`` (odometry, contact states: messages that only pair
    with the next joint state) are not waited for: at every wake-up, before anything else, each
    is taken until empty (at most ``COMPANION_TAKES``). A sample of three messages (odometry,
    contact state, joint state) then wakes the loop once, not up to three times, and the
    companions are still taken before the joint state that came with them.

    Every callback of the node takes the message alone (no MessageInfo), as rclpy's default.
    """

    def __init__(self, node: Any, executor: Any) -> None:
        from rclpy.exceptions import InvalidHandle
        from rclpy.impl.implementation_singleton import rclpy_implementation

        if node.executor is not executor:
            raise ValueError("LeanSpin: add the node to the executor first (executor.add_node(node))")
        self._node, self._executor = node, executor
        self._make_wait_set, self._invalid = rclpy_implementation.WaitSet, InvalidHandle
        self._context = node.context.handle
        self._seen: tuple[tuple[Any, ...], ...] = ()
        self._wait_set: Any = None
        self._subscriptions: dict[int, Any] = {}  # handle pointer -> subscription, in calling order
        self._companions: list[Any] = []  # taken at every wake-up, not waited for
        self._timers: dict[int, Any] = {}
        self._guards: dict[int, Any] = {}
        self._handles: list[Any] = []
        self._waitables: tuple[Any, ...] = ()
        self._general = False  # entities only the executor serves (services, clients, guards)
        self._events_due = 0.0  # time.monotonic() from which the next wait includes the QoS events
        self._changed = True  # the node's entities may have changed since the wait set was made
        woken = executor.wake

        def wake() -> None:  # rclpy calls it whenever the node creates or destroys an entity
            self._changed = True
            woken()
        executor.wake = wake

    def _entities(self) -> tuple[tuple[Any, ...], ...]:
        n = self._node
        return (tuple(n.subscriptions), tuple(n.timers), tuple(n.services), tuple(n.clients),
                tuple(n.guards), tuple(n.waitables))

    def _prepare(self, entities: tuple[tuple[Any, ...], ...]) -> None:
        subscriptions, timers, services, clients, guards, waitables = entities
        last = getattr(self._node, "joint_state_subscription", None)
        companions = tuple(getattr(self._node, "companion_subscriptions", ()))
        self._companions = [s for s in subscriptions if s in companions]
        waited = [s for s in subscriptions if s not in companions]
        ordered = [s for s in waited if s is not last] + [s for s in waited if s is last]
        events = sum(w.get_num_entities().num_events for w in waitables)
        self._wait_set = self._make_wait_set(len(ordered), len(guards), len(timers), len(clients),
                                             len(services), events, self._context)
        ws = self._wait_set
        self._handles = [(ws.add_subscription, s.handle) for s in ordered] + \
            [(ws.add_timer, t.handle) for t in timers] + [(ws.add_service, s.handle) for s in services] + \
            [(ws.add_client, c.handle) for c in clients] + [(ws.add_guard_condition, g.handle) for g in guards]
        self._subscriptions = {s.handle.pointer: s for s in ordered}
        self._timers = {t.handle.pointer: t for t in timers}
        self._guards = {g.handle.pointer: g for g in guards}
        self._waitables = waitables
        self._general = bool(services or clients or guards)
        self._seen = entities

    def spin_once(self, timeout_sec: float) -> None:
        """Wait up to ``timeout_sec`` for work and do all of it that is ready."""
        if self._changed:
            self._changed = False
            entities = self._entities()
            if entities != self._seen:
                self._prepare(entities)
        ws = self._wait_set
        ws.clear_entities()
        for add, handle in self._handles:
            add(handle)
        now = time.monotonic()
        events = bool(self._waitables) and now >= self._events_due
        if events:
            self._events_due = now + EVENTS_S
            for waitable in self._waitables:
                waitable.add_to_wait_set(ws)
        ws.wait(int(timeout_sec * 1e9))
        for sub in self._companions:
            for _ in range(COMPANION_TAKES):
                try:
                    with sub.handle:
                        taken = sub.handle.take_message(sub.msg_type, sub.raw)
                except self._invalid:  # destroyed by an earlier callback of this round
                    break
                if taken is None:
                    break
                sub.callback(taken[0])
        ready = set(ws.get_ready_entities("subscription"))
        for pointer, sub in self._subscriptions.items():
            if pointer in ready:
                try:
                    with sub.handle:
                        taken = sub.handle.take_message(sub.msg_type, sub.raw)
                except self._invalid:  # destroyed by an earlier callback of this round
                    continue
                if taken is not None:
                    sub.callback(taken[0])
        for pointer in ws.get_ready_entities("timer"):
            timer = self._timers.get(pointer)
            if timer is not None and timer.handle.is_timer_ready():
                timer.handle.call_timer()
                timer.callback()
        if not self._general and not events:
            return
        guards = [self._guards[g] for g in ws.get_ready_entities("guard_condition") if g in self._guards]
        for guard in guards:
            guard.trigger()
        # A waitable not added to this wait holds the index of an earlier one: asked only when added.
        if guards or ws.get_ready_entities("service") or ws.get_ready_entities("client") \
                or (events and any(w.is_ready(ws) for w in self._waitables)):
            self._executor.spin_once(timeout_sec=0.0)


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
        loop = LeanSpin(node, executor)
        while stop.requested is None and context.ok():
            loop.spin_once(POLL_S)
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
