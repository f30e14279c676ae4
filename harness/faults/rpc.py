"""``rpc``: the RPC message a compute sends at the point is lost, on the real
oslo.messaging path.

- a cast is dropped: its callee never runs, its sender carries on (a
  message lost with a restarted broker or a full queue);
- a call raises ``MessagingTimeout`` to its caller, its callee never having
  run (the request lost; production waits ``rpc_response_timeout`` first).

Nova's own handling runs (for a call: its caller's ``except``; for a cast:
nothing, which is the point). A move that absorbed the loss runs its ending
as any other item; one that failed or stalled is checked against the
database's ledger, its servers deleted and checked again
(:mod:`harness.faults.aftermath`). Only a compute's own messages are points:
the API's and the conductor's run on no host.
"""
import threading

import fixtures

from harness.faults import aftermath
from harness.faults.base import Fault, Strike
from harness.faults.restart import RESTARTABLE


class Rpc(Fault):
    kind = glob = "rpc"
    periodic = False
    label = "message lost from"
    operations = RESTARTABLE
    recreatable = False
    summary = ("rpc: the compute's RPC message at the point is lost (a cast never arrives, a "
               "call times out); a failed or stalled move's servers are then deleted (resize, "
               "cold migration, evacuate)")

    @classmethod
    def parse(cls, spec: str):
        return cls(spec) if spec == cls.kind else None

    @property
    def memoizable(self):
        return False  # the run leaves the traced path at the point: nothing to inherit

    def arm(self, injector):
        return RpcStrike(injector)

    def strikes(self, scen, point_id, targets):
        """The host sending the message at the point (an RPC API method's)."""
        if not point_id.split(">", 1)[1].split(".", 1)[0].endswith("_rpc"):
            return []
        return self.calling_host(scen, point_id, targets)

    def missed(self, fired_at, hosts, reached):
        return [f"injection did not fire: {what.split('(', 1)[0].strip()} sent no message "
                "after the point" for what in fired_at if "to lose" in what]


class RpcStrike(Strike):
    """Arm the calling thread's next message; end the waits if the move failed or stalled."""

    def __init__(self, injector):
        super().__init__(injector)
        self.armed = threading.local()

    def install(self):
        import oslo_messaging
        prepare = oslo_messaging.RPCClient.prepare
        strike = self

        def prepared(client, *args, **kwargs):
            cctxt = prepare(client, *args, **kwargs)
            cast, call = cctxt.cast, cctxt.call

            def losing_cast(ctxt, method, **kw):
                if strike._take("cast lost"):
                    return None
                return cast(ctxt, method, **kw)

            def timing_out_call(ctxt, method, **kw):
                if strike._take("call timed out"):
                    raise oslo_messaging.MessagingTimeout(
                        f"Timed out waiting for a reply to {method} (lost by nova-chaos)")
                return call(ctxt, method, **kw)
            cctxt.cast, cctxt.call = losing_cast, timing_out_call
            return cctxt
        self.injector.useFixture(fixtures.MonkeyPatch("oslo_messaging.RPCClient.prepare",
                                                      prepared))

    def _take(self, what) -> bool:
        """The message being sent is the armed one: record how it was lost."""
        if getattr(self.armed, "point", None) is None:
            return False
        self.armed.point = None
        inj = self.injector.injection
        inj.fired_at[-1] = inj.fired_at[-1].replace("to lose", what)
        return True

    def at_point(self, point):
        injector = self.injector
        tracer, inj, run = injector.tracer, injector.injection, injector.run
        host = tracer.host_of_role(point.role)
        inj.hosts = [host]
        inj.fired_at.append(f"{host} ({point.callee} to lose)")
        run.where = f"{point.callee} lost from {host} at {point.id}"
        with tracer.suspended():  # what the loss meets: a root cause's condition
            injector.note_state(host, allocations=True)
        self.armed.point = point.id
        run.cloud.interruption = aftermath.Aftermath(run, host, f"{point.callee} lost")

    def after_crash(self, run, crash):
        aftermath.recover(run, crash)

    def abandon(self):
        self.armed.point = None
