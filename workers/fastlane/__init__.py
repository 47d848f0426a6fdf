"""FastLane: live environment frames from a worker to the app through shared memory.

- ``workers.fastlane.layout``: the segment layout, imported by both ends.
- ``workers.fastlane.writer``: ``FrameWriter`` (worker side), ``tile``, ``cleanup``.
- ``workers.fastlane.reader``: ``FrameReader`` (app side).

docs/fastlane.md describes the layout and the protocol. This package imports
nothing itself, so importing one end does not pull in the other.
"""
