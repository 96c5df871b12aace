"""Full collections wait for the operator to be idle, and the process gets its schedule back."""

from __future__ import annotations

import gc

from console.tui.idle_gc import NO_AUTOMATIC_FULL_COLLECTION, IdleCollector


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def full_collections() -> list[int]:
    seen: list[int] = []

    def callback(phase, info):
        if phase == "start" and info["generation"] == 2:
            seen.append(1)

    gc.callbacks.append(callback)
    return seen


def test_full_collection_only_when_idle_and_schedule_restored():
    before = gc.get_threshold()
    clock = Clock()
    collector = IdleCollector(idle_seconds=1.0, clock=clock)
    seen = full_collections()
    try:
        collector.start()
        assert gc.get_threshold()[2] == NO_AUTOMATIC_FULL_COLLECTION
        assert gc.get_freeze_count() > 0
        seen.clear()
        gc.collect(1)  # something was promoted to the old generation
        collector.note_input()
        clock.now += 0.5
        assert collector.tick() is False and not seen  # typing: no full collection
        clock.now += 0.6
        assert collector.tick() is True and seen  # idle: collected
        seen.clear()
        assert collector.tick() is False and not seen  # nothing new since
    finally:
        gc.callbacks.pop()
        collector.stop()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
