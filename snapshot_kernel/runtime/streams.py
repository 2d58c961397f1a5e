"""What a capture keeps of one output stream: how much was written, the tail a reply
shows after its head, and, once the stream outgrew the reply, its whole text for paging.

Cuts fall at line boundaries where a line ends near them, so that a fragment
of a line (``983`` of ``29983``) never reads as a line of its own.
"""

import codecs
import collections
import tempfile


class Stream:
    """One stream's keeping, besides its head (which is in the capture's outputs).

    Mutable, guarded by its capture's lock; ``copy`` and ``restore`` let the
    capture undo a batch of writes that an interrupt cut short.
    """

    __slots__ = ("seen", "head", "head_closed", "head_ends_line", "tail", "tail_used",
                 "omitted", "last_dropped", "full", "_full_at")

    def __init__(self):
        self.seen = 0              # characters written in all
        self.head = 0              # characters of them in the head
        self.head_closed = False   # past the head: the rest goes to the tail
        self.head_ends_line = True  # the head is empty or ends with a newline
        self.tail = None           # deque of the latest (position, order, text) past the head
        self.tail_used = self.omitted = 0
        self.last_dropped = "\n"   # the last character dropped from the tail's front
        self.full = None           # FullText, once the stream outgrew the reply
        self._full_at = None

    def copy(self):
        """A copy to ``restore`` from; the full text is shared, and noted where it ends."""
        other = Stream()
        for name in Stream.__slots__:
            setattr(other, name, getattr(self, name))
        if self.tail is not None:
            other.tail = collections.deque(self.tail)
        other._full_at = None if self.full is None else self.full.end()
        return other

    def restore(self):
        """Put this copy's full text back to where it ended when copied; return self."""
        if self.full is not None:
            self.full.rewind(self._full_at)
        return self

    def head_cut(self, part):
        """How much of ``part``, the last piece that fits in the head, the head takes:
        up to its last newline, or all of it if no line ends there and the head so far
        is empty or ends within a line (a longer line has to be cut somewhere)."""
        cut = part.rfind("\n") + 1
        if cut == 0 and not (self.head and self.head_ends_line):
            return len(part)
        return cut

    def keep_tail(self, text, room, position, order):
        """Keep ``text`` at the end of the tail, dropping from its front past ``room``.
        ``position`` is how many output items came before it, ``order`` a number that
        grows with each piece the capture keeps: where the piece goes among them."""
        if self.tail is None:
            self.tail = collections.deque()
        tail = self.tail
        tail.append((position, order, text))
        used = self.tail_used + len(text)
        while used > room:
            excess = used - room
            first = tail.popleft()
            if len(first[2]) > excess:
                tail.appendleft((first[0], first[1], first[2][excess:]))
            dropped = min(len(first[2]), excess)
            self.last_dropped = first[2][dropped - 1]
            used -= dropped
            self.omitted += dropped
        self.tail_used = used

    def shown_tail(self, name, room):
        """The tail as a reply shows it: ``[(position, order, text)]`` (see ``keep_tail``),
        the first text after a marker saying how much was left out."""
        # Trimmed again here: an interrupt can land between a write and its trim.
        text = "".join(piece[2] for piece in self.tail)
        start = max(len(text) - room, 0)
        omitted = self.omitted + start
        before = text[start - 1] if start else self.last_dropped
        if omitted and before != "\n":  # cut within a line: start at the next one
            newline = text.find("\n", start, len(text) - 1)
            if newline >= 0:
                omitted += newline + 1 - start
                start = newline + 1
        pieces = _from(self.tail, start)
        if omitted and pieces:
            marker = f"[... {omitted} characters of {name} omitted ...]\n"
            position, order, first = pieces[0]
            pieces[0] = (position, order,
                         ("" if self.head_ends_line else "\n") + marker + first)
        return pieces


def _from(pieces, start):
    """The ``(position, order, text)`` pieces with their first ``start`` characters left out."""
    kept = []
    for position, order, text in pieces:
        if start >= len(text):
            start -= len(text)
            continue
        kept.append((position, order, text[start:]))
        start = 0
    return kept


class FullText:
    """The whole text of one stream, in a temporary file, up to ``cap`` bytes of UTF-8.

    Paging is by character offsets: every ``STEP`` characters, the byte offset
    where they start is noted, so a read decodes from the nearest note.
    """

    STEP = 1 << 16

    def __init__(self, cap):
        self.cap = cap
        self.chars = self._bytes = 0
        self.capped = False
        self._file = tempfile.TemporaryFile()
        self._marks = [(0, 0)]  # (character offset, byte offset)

    def write(self, text):
        if self.capped or not text:
            return
        data = text.encode("utf-8", "surrogatepass")
        if self._bytes + len(data) > self.cap:
            text = data[:self.cap - self._bytes].decode("utf-8", "ignore")
            data = text.encode("utf-8", "surrogatepass")
            self.capped = True
        self._file.seek(self._bytes)
        self._file.write(data)
        if (self.chars + len(text)) // self.STEP > self.chars // self.STEP:
            self._marks.append((self.chars + len(text), self._bytes + len(data)))
        self.chars += len(text)
        self._bytes += len(data)

    def end(self):
        """Where the text ends now, for ``rewind``."""
        return self.chars, self._bytes, self.capped, len(self._marks)

    def rewind(self, end):
        """Forget what was written since ``end()`` said ``end``."""
        self.chars, self._bytes, self.capped, marks = end
        del self._marks[marks:]
        self._file.truncate(self._bytes)

    def read(self, offset, limit):
        start, position = max((mark for mark in self._marks if mark[0] <= offset),
                              default=(0, 0))
        self._file.seek(position)
        decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
        text, wanted = "", offset - start + limit
        while len(text) < wanted:
            block = self._file.read(max(wanted - len(text), 4096) * 4)
            if not block:
                break
            text += decoder.decode(block)
        return text[offset - start:offset - start + limit]

    def close(self):
        self._file.close()
