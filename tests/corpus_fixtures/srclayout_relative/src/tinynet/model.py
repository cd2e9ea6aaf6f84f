from .layers.base import Backbone


class TinyNet(Backbone):
    """Found only through the project's own base class."""

    def __init__(self):
        super().__init__(width=20)
