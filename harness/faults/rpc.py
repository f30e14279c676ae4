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
import fixtures

from harness.faults import aftermath
from harness.faults.base import Fault


class Rpc(Fault):
    kind = glob = "rpc"
    periodic = False
    label = "message lost from"
    recreatable = False
    summary = ("rpc: the compute's RPC message at the point is lost (a cast never arrives, a "
               "call times out); a failed or stalled move's servers are then deleted")

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
        return aftermath.unsent(fired_at, "no message")


class RpcStrike(aftermath.ArmedStrike):
    """The striking thread's next message is lost: a cast dropped, a call timed out."""

    pending, failing = "to lose", "lost"

    def install(self):
        import oslo_messaging
        super().install()
        prepare = oslo_messaging.RPCClient.prepare
        strike = self

        def prepared(client, *args, **kwargs):
            cctxt = prepare(client, *args, **kwargs)
            cast, call = cctxt.cast, cctxt.call

            def losing_cast(ctxt, method, **kw):
                if strike.take("cast lost"):
                    return None
                return cast(ctxt, method, **kw)

            def timing_out_call(ctxt, method, **kw):
                if strike.take("call timed out"):
                    lost = oslo_messaging.MessagingTimeout(
                        f"Timed out waiting for a reply to {method} (lost by nova-chaos)")
                    lost.lost_by_nova_chaos = True
                    raise lost
                try:
                    return call(ctxt, method, **kw)
                except oslo_messaging.MessagingTimeout as exc:
                    if not getattr(exc, "lost_by_nova_chaos", False):
                        raise
                    raise as_delivered(exc) from None
            cctxt.cast, cctxt.call = losing_cast, timing_out_call
            return cctxt
        self.injector.useFixture(fixtures.MonkeyPatch("oslo_messaging.RPCClient.prepare",
                                                      prepared))


def as_delivered(exc):
    """The fault's timeout, raised in a callee, as production hands it to the caller.

    The in-process transport re-raises the callee's exception object; a real
    one serializes it and the caller's deserializer rebuilds only builtins
    and the modules Nova allows (``nova.exception``): any other class -- the
    callee's own ``MessagingTimeout`` among them -- arrives as
    ``RemoteError`` ("Remote error: MessagingTimeout ..."), which a caller's
    ``except MessagingTimeout`` does not catch (bug 2044235's shape). We run
    oslo.messaging's own serializer and deserializer on it.
    """
    from nova import rpc
    from oslo_messaging._drivers import common
    data = common.serialize_remote_exception((type(exc), exc, exc.__traceback__))
    return common.deserialize_remote_exception(data, rpc.get_allowed_exmods())
