"""Every error the harness raises on purpose, one line of why each.

A :class:`UsageError` ends the CLI with one line and exit code 2; any other
:class:`HarnessError` that reaches it (the harness could not run: a
subprocess of its own died) with one line and exit code 3. Findings are not
errors: they are verdicts (exit code 1).
"""

#: the CLI's exit codes: every item passed; findings (a fail or error verdict);
#: bad input or environment; the harness itself could not run
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_BROKEN = 0, 1, 2, 3


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

    #: how many valid choices the line names (every scenario; a point id's hundreds are cut)
    SHOWN = 32

    def __init__(self, kind, value, choices):
        shown = (", ".join(sorted(choices)[:self.SHOWN])
                 + (" ..." if len(choices) > self.SHOWN else ""))
        super().__init__(f"unknown {kind} {value!r}; valid: {shown or '(none)'}")


class SubprocessFailed(HarnessError):
    """A subprocess of the harness's own (discovery, a worker) died without a result."""


class ScenarioFailed(HarnessError):
    """A scenario step could not complete (the cloud refused or stalled)."""


class RunTimeout(HarnessError):
    """A bounded wait ran out; the message says where the run was."""


class NondeterministicTrace(HarnessError):
    """Two recording runs of the same scenario reached different yield points."""


class MoveInterrupted(HarnessError):
    """A fault ended the move mid-step: the step cannot finish.

    Not a ScenarioFailed: no step may take it for Nova refusing; the
    fault's recovery (its Strike's ``after_crash``) takes over.
    """


class HostCrashed(MoveInterrupted):
    """A compute host died mid-step (the restart fault)."""

    def __init__(self, host):
        super().__init__(f"compute {host} died")
        self.host = host


class MoveFailed(MoveInterrupted):
    """A call failed where a fault made it fail, and Nova's handling of it is over."""

    def __init__(self, host, what):
        super().__init__(f"{what} failed on {host}")
        self.host = host


#: how a nova-chaos process states why it stopped: one line on stderr (the CLI's usage
#: errors, a worker's crash); a parent reads it back with :func:`reason_of`
REASON_PREFIX = "nova-chaos: error: "


def reason_of(returncode: int, stderr: str) -> str:
    """Why a nova-chaos subprocess failed, in its own words: one line.

    Its stated reason (the line :data:`REASON_PREFIX` starts), else the
    exception a traceback ends in, else how it ended. Never an arbitrary last
    line of its output: that is whatever it happened to log (measured: the
    last line of a failing run's report, ``after-delete: ok``, said the opposite).
    """
    lines = stderr.splitlines()
    stated = [ln[len(REASON_PREFIX):] for ln in lines if ln.startswith(REASON_PREFIX)]
    if stated:
        return stated[-1].strip()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")]
    if starts:
        raised = [ln for ln in lines[starts[-1] + 1:] if ln and not ln[0].isspace()]
        if raised:
            return raised[0].strip()[:300]
    if returncode < 0:
        import signal
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode} without saying why"
