"""The dynamics node as a managed node (rclpy.lifecycle), for stacks brought up in order by a
lifecycle manager (Nav2's, launch's lifecycle events) or ``ros2 lifecycle set``.

Console script ``dynamics_lifecycle_node`` (``lifecycle:=true`` in launch/dynamics.launch.py).
The node's body is DynamicsNode's; the transitions only call its three steps:

- configure: publishers, subscriptions, the diagnostics timer, the model (from the
  ``robot_description`` parameter, or later from the topic) and the kernel warm-up. Fails
  (back to unconfigured, everything released) when the parameter's URDF cannot be built.
- activate / deactivate: joint states are computed and the outputs published only while
  active; deactivating keeps the model and the compiled kernels. /diagnostics reports in both
  states ("inactive (no outputs): ..." while inactive).
- cleanup / shutdown: the kernel build stopped, the model dropped, every publisher,
  subscription and timer of the configuration destroyed.
"""
from __future__ import annotations

import traceback
from typing import Callable

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from liedyn_ros.dynamics_node import DynamicsNode


class LifecycleDynamicsNode(DynamicsNode, LifecycleNode):
    """DynamicsNode in the lifecycle's states: unconfigured at first, publishing only when active."""

    def __init__(self) -> None:
        super().__init__(managed=True)

    def _step(self, what: str, step: Callable[[], bool | None]) -> TransitionCallbackReturn:
        """Run one transition's step (False: it failed, and said why); an exception releases
        everything and fails the transition with its reason logged (rclpy would turn it into a
        silent error)."""
        try:
            ok = step()
        except Exception as exc:
            self.get_logger().error(f"{what} failed: {exc}\n{traceback.format_exc(limit=-3)}")
            self._active = False
            self._release()
            return TransitionCallbackReturn.FAILURE
        return TransitionCallbackReturn.SUCCESS if ok is not False else TransitionCallbackReturn.FAILURE

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        def configure() -> bool:
            self._configure()
            if self._pipeline is None and str(self.get_parameter("robot_description").value):
                self.get_logger().error(f"configure failed: {self._model_status}")
                self._release()
                return False
            return True
        return self._step("configure", configure)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = True
        self.get_logger().info("active: computing and publishing the outputs")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self.get_logger().info("inactive: no outputs (the model is kept)")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._step("cleanup", self._release)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        return self._step("shutdown", self._release)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        return self._step("error processing", self._release)  # back to unconfigured
