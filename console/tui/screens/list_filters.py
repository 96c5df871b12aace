"""The `/` (search) and `p` (project) keys of the database lists (approvals, environments).

Both open the one filter box (widgets/filter_box.py): search applies as you type, the project on
Enter once a worker has found it (an unknown project would make every read of the list refuse, and
the list would stay as it was under a filter line that lies). What a filter means is the screen's:
it gets `apply_filter(mode, value)` and re-reads its list, whose search is a predicate of the page
query (console/services/approval_queue.py, environment_queries.py), so a search pages at the
database like any other filter.
"""

from __future__ import annotations

from textual import work
from textual.message import Message

from console.services import navigation
from widgets.filter_box import FilterBox
from widgets.safe_text import clean


class ListFilters:
    """Mixed into a `ConsoleScreen` with a `#filters` line: `/` and `p` open the filter box."""

    SEARCH_HINT = "text to find (as you type; Enter keeps it, Escape puts back the last)"
    PROJECT_HINT = "project id or name (Enter; empty = all)"

    def apply_filter(self, mode: str, value: str | None) -> None:
        """Show the list filtered by `value` (None: no such filter) for `mode` "search" or "project"."""
        raise NotImplementedError

    def current_filter(self, mode: str) -> str | None:
        raise NotImplementedError

    def action_search(self) -> None:
        FilterBox.open_on(self, "search", self.current_filter("search"), self.SEARCH_HINT, live=True)

    def action_filter_project(self) -> None:
        FilterBox.open_on(self, "project", self.current_filter("project"), self.PROJECT_HINT, live=False)

    def on_filter_box_applied(self, message: FilterBox.Applied) -> None:
        message.stop()
        if message.value == self.current_filter(message.mode):
            return
        if message.mode == "project" and message.value is not None:
            self._check_project(message.value)
        else:
            self.apply_filter(message.mode, message.value)

    class ProjectChecked(Message):
        def __init__(self, target: "navigation.Target") -> None:
            super().__init__()
            self.target = target

    @work(thread=True, exclusive=True, group="list-project", exit_on_error=False)
    def _check_project(self, typed: str) -> None:
        """The project as `:project` finds it (console/services/navigation.py): by id or name, or
        what it starts with or contains; several are offered; a typo gets "did you mean"."""
        from console.errors import ConsoleError

        try:
            target = self.session.run(navigation.project_target, self.COMMAND, typed)
        except ConsoleError as exc:
            target = navigation.Target(refusal=exc.reason)
        self.post_message(self.ProjectChecked(target))

    def on_list_filters_project_checked(self, message: ProjectChecked) -> None:
        target = message.target
        if target.refusal is not None:
            self.notify(clean(f"{target.refusal} The filter is unchanged.", one_line=True), severity="warning",
                        markup=False)
        elif target.choices:
            from console.tui.screens.choose import ChooseModal

            def chosen(value: str | None) -> None:
                if value is not None:
                    self.apply_filter("project", value)

            self.app.push_screen(ChooseModal("Which one? The list shows the project you pick", target.choices),
                                 chosen)
        elif target.argument is not None:
            self.apply_filter("project", target.argument)


__all__ = ["ListFilters"]
