"""Settings whose values are objects kept as set, not copied (started mock patches,
logging handlers): equal when they hold the very same objects, in order."""


class SameObjects:
    """Immutable: a tuple of objects, compared by identity."""

    __slots__ = ("objects",)

    def __init__(self, objects):
        self.objects = tuple(objects)

    def holds(self, objects):
        """True if ``objects`` (a sequence) are this one's, in order."""
        return len(objects) == len(self.objects) and all(
            mine is theirs for mine, theirs in zip(objects, self.objects))

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self.holds(other.objects)

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None
