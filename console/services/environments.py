"""Execution environments: browsing, and exclusive operation claims (stop, retire, reset, cleanup_retry).

The screens and the CLI call this module; its parts live beside it, one responsibility each:
`environment_queries` (reading: the list, one environment, what is derived), `environment_claims`
(the writes), `environment_rules` (the rules both use, and `claim_options`, which says in advance
what the writes would do), `environment_pages` (counts and jumps for paged views). The models they
return are in console/models/environments.py.

A claim is the triple (`operation_claim_id`, `operation_kind`, `operation_claimed_at`). Archon's
trigger only checks that the triple is all-or-nothing; it lets one claim overwrite another
(docs/archon-schema.md, operation claims), so exclusivity lives here: every write is a compare-and-set that must change
exactly one row, inside one `BEGIN IMMEDIATE` transaction that re-reads every precondition.

A takeover (of a stale claim, with a reason) keeps the operation it takes over; a claim the console
did not create also needs its holder named, since its staleness is only the console's assumption.

A claim is an administrative hold (docs/decisions.md, Q6): it stops new leases at once (lease admission
refuses claimed environments). The console cannot stop or delete a container, so it never writes
`lifecycle_state` (that would claim a provider-side effect nobody performed). Completing a claim
*hands the operation off* to archon's own scheduling column and clears the claim, in one UPDATE:

- stop: `idle_stop_at = now`; archon's idle-stop sweep (the one `idx_execution_environments_idle_stop`
  serves) stops the environment. Refused while a run is bound to it (an execution lease or a
  validation binding not released): what the sweep does to a running run is not known (docs/decisions.md, "Archon behaviour the environment claims assume").
- retire: the claim already set `retirement_requested_at`, which archon's reuse index and lease
  admission honour; completing only clears the claim, and archon's retirement path
  (retiring -> cleanup_pending -> retired) does the rest. The request is never cleared (Q7).
- cleanup_retry: `cleanup_retry_at = now`; archon's cleanup worker retries.
- reset: no completion. Marking a failed environment `ready` would let lease admission place runs
  on a workspace nobody rebuilt; a reset claim is a hold that its holder releases.

`updated_at` is never touched (it orders archon's cleanup index, Q8; no state changes here).
A handed-off request stays visible (`pending_handoffs`) until archon acts on it.
"""

from __future__ import annotations

from console.models.environments import (
    ClaimOptions,
    ClaimResult,
    EnvironmentEvent,
    EnvironmentLease,
    EnvironmentPage,
    EnvironmentView,
    Handoff,
    PendingHandoff,
)
from console.services.environment_claims import claim, complete, release
from console.services.environment_queries import (
    claims_supported,
    environment_query,
    list_environments,
    pending_handoffs,
    show_environment,
)
from console.services.environment_rules import (
    ADMITTING_STATES,
    ALLOWED_STATES,
    CLAIM_ACTIONS,
    DEFAULT_STALE_AFTER,
    HANDOFF,
    OPERATIONS,
    STATES,
    WHY_ALLOWED,
    bound_runs_words,
    claim_holder,
    claim_options,
    cleanup_claim_blocks,
    completion_effect,
    default_stale_after,
    foreign_claim_assumption,
    held_by,
    lease_blocks_stop,
    operations_help,
)

__all__ = [
    "ADMITTING_STATES",
    "ALLOWED_STATES",
    "CLAIM_ACTIONS",
    "ClaimOptions",
    "ClaimResult",
    "DEFAULT_STALE_AFTER",
    "EnvironmentEvent",
    "EnvironmentLease",
    "EnvironmentPage",
    "EnvironmentView",
    "HANDOFF",
    "Handoff",
    "OPERATIONS",
    "PendingHandoff",
    "STATES",
    "WHY_ALLOWED",
    "bound_runs_words",
    "claim",
    "claim_holder",
    "claim_options",
    "claims_supported",
    "cleanup_claim_blocks",
    "complete",
    "completion_effect",
    "default_stale_after",
    "environment_query",
    "foreign_claim_assumption",
    "held_by",
    "lease_blocks_stop",
    "list_environments",
    "operations_help",
    "pending_handoffs",
    "release",
    "show_environment",
]
