"""``rpc``: the RPC message a compute sends at the point is lost, on the real
oslo.messaging path.

- ``rpc``: the request is lost.
  - A cast is dropped: its callee never runs, and its sender carries on (a
    message lost with a restarted broker or a full queue).
  - A call raises ``MessagingTimeout`` to its caller, its callee never having
    run (production waits ``rpc_response_timeout`` first).
- ``rpc:reply``: a call's reply is lost. Its callee ran to the end, or raised;
  either way its caller gets ``MessagingTimeout`` (a reply queue gone with a
  broker failover, or a callee slower than the timeout). Only calls are
  points.

Nova's own handling runs:
- for a call: its caller's ``except``;
- for a cast: nothing, which is the point.

A move that absorbed the loss runs its ending as any other item. A move that
failed or stalled is checked against the database's ledger, then its servers
are deleted and it is checked again (:mod:`harness.faults.aftermath`). Only a
compute's own messages are points: the API's and the conductor's run on no
host.
"""
import functools
import inspect
import re

import fixtures

from harness.faults import aftermath
from harness.explore import point_ids
from harness.faults.base import Fault

#: the variants, as the spec names them after ``rpc:``: the request lost, a call's reply lost
VARIANTS = ("", "reply")


@functools.lru_cache(maxsize=None)
def sends(label: str) -> frozenset:
    """How the RPC API method a label names sends its message (``call``, ``cast``; both
    where its caller chooses; none: it sends nothing, as ``supports_numa_live_migration``),
    read from the loaded Nova's rpcapi module."""
    from harness.explore import yieldpoints
    for _, cls, attr, named in yieldpoints.rpc_targets():
        if named == label:
            return frozenset(re.findall(r"\.(call|cast)\b", inspect.getsource(vars(cls)[attr])))
    return frozenset()


class Rpc(Fault):
    kind = "rpc"
    glob = "rpc*"
    periodic = False
    label = "message lost from"
    summary = ("rpc|rpc:reply: the compute's RPC message at the point is lost (a cast never "
               "arrives, a call times out; rpc:reply: a call's callee runs and its reply is "
               "lost); a failed or stalled move's servers are then deleted")

    def __init__(self, spec: str, variant: str):
        super().__init__(spec)
        self.variant = variant

    @classmethod
    def parse(cls, spec: str):
        kind, _, variant = spec.partition(":")
        if kind != cls.kind or variant not in VARIANTS or spec.endswith(":"):
            return None
        return cls(spec, variant)

    @property
    def memoizable(self):
        return False  # the run leaves the traced path at the point: nothing to inherit

    @property
    def fails_call(self):
        return self.variant or "lost"

    def fails_at(self, point_id):
        """A lost request is a lost cast or call as the method sends it (None: its
        caller chooses)."""
        if self.variant:
            return self.variant
        how = sends(point_ids.callee(point_id))
        return f"lost-{next(iter(how))}" if len(how) == 1 else None

    def arm(self, injector):
        return RpcStrike(injector, reply=self.variant == "reply")

    def strikes(self, scen, point_id, targets):
        """The host sending the message at the point: an RPC API method that sends one
        (for a lost reply, one that calls)."""
        label = point_ids.callee(point_id)
        if not label.split(".", 1)[0].endswith("_rpc"):
            return []
        how = sends(label)
        if not how or (self.variant == "reply" and how != {"call"}):
            return []
        return self.calling_host(scen, point_id, targets)

    def missed(self, fired_at, hosts, reached):
        return aftermath.unsent(fired_at, "no message")


class RpcStrike(aftermath.ArmedStrike):
    """The striking thread's next message is lost: a cast dropped, a call timed out
    (``reply``: the next call runs, then times out)."""

    pending, failing = "to lose", "lost"

    def __init__(self, injector, reply: bool = False):
        super().__init__(injector)
        self.reply = reply

    def install(self):
        import oslo_messaging
        super().install()
        prepare = oslo_messaging.RPCClient.prepare
        strike = self

        def timeout(method):
            lost = oslo_messaging.MessagingTimeout(
                f"Timed out waiting for a reply to {method} (lost by nova-chaos)")
            lost.lost_by_nova_chaos = True
            return lost

        def prepared(client, *args, **kwargs):
            cctxt = prepare(client, *args, **kwargs)
            cast, call = cctxt.cast, cctxt.call

            def losing_cast(ctxt, method, **kw):
                if strike.reply:
                    strike.abandon()  # a cast has no reply: the item reports it missed
                elif strike.take("cast lost"):
                    return None
                return cast(ctxt, method, **kw)

            def timing_out_call(ctxt, method, **kw):
                if strike.take("reply lost" if strike.reply else "call timed out"):
                    if strike.reply:
                        try:
                            call(ctxt, method, **kw)
                        except Exception:  # noqa: S110 -- the callee's error went with its reply
                            pass
                    raise timeout(method)
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
