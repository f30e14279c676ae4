"""Every error the harness raises on purpose, one line of why each.

A :class:`UsageError` ends the CLI with one line and exit code 2; a
:class:`CheckFailed` is a finding (exit code 1).
"""


class HarnessError(Exception):
    """Base of the harness's own errors."""


class UsageError(HarnessError):
    """Bad input or environment: the message is the one line the user sees."""


class InvalidScenario(UsageError):
    """A scenario file is malformed or names something that does not exist."""


class InvalidTopology(InvalidScenario):
    """A host topology is malformed (cells, CPUs, hugepage pools)."""


class NovaUnusable(UsageError):
    """The Nova that ``import nova`` resolves to cannot be driven."""


class UnknownChoice(UsageError):
    """A named value (scenario, point id, target, ending, mutation) is unknown."""

    def __init__(self, kind, value, choices):
        shown = ", ".join(sorted(choices)[:12]) + (" ..." if len(choices) > 12 else "")
        super().__init__(f"unknown {kind} {value!r}; valid: {shown or '(none)'}")


class ScenarioFailed(HarnessError):
    """A scenario step could not complete (the cloud refused or stalled)."""


class RunTimeout(HarnessError):
    """A bounded wait ran out; the message says where the run was."""


class NondeterministicTrace(HarnessError):
    """Two recording runs of the same scenario reached different yield points."""


class HostCrashed(HarnessError):
    """A compute host died mid-step (the restart fault): the step cannot finish.

    Not a ScenarioFailed: no step may take it for Nova refusing; the run's
    recovery (``harness.explore.restart``) takes over.
    """

    def __init__(self, host):
        super().__init__(f"compute {host} died")
        self.host = host
