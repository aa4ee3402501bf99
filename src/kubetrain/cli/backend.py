"""The backend contract the CLI verbs use; defined in ``kubetrain.api.views`` so backends need not import cli."""

from kubetrain.api.views import Backend, Event, StepView, TrainJobDetails

__all__ = ["Backend", "Event", "StepView", "TrainJobDetails"]
