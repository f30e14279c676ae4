"""A cast's sender never sees its callee fail: what faults that make a call fail need.

In production the sender of a cast has moved on when the callee runs. Nova's
CastAsCall (the in-process cloud's) waits for the callee and hands its
exception back; a fault's failure (after the callee's own handlers logged it
and undid what they undo) is dropped at the cast by :class:`CastsDrop`, so
that no handler of the sender's runs on a failure it could not have seen.
"""
import fixtures


class CastsDrop(fixtures.Fixture):
    """Every cast's exception that ``caused(exc)`` says the fault caused is dropped."""

    def __init__(self, caused):
        super().__init__()
        self.caused = caused

    def _setUp(self):
        import oslo_messaging
        prepare = oslo_messaging.RPCClient.prepare
        caused = self.caused

        def prepared(client, *args, **kwargs):
            cctxt = prepare(client, *args, **kwargs)
            cast = cctxt.cast

            def dropping(*a, **k):
                try:
                    return cast(*a, **k)
                except Exception as exc:
                    if not caused(exc):
                        raise
            cctxt.cast = dropping
            return cctxt
        self.useFixture(fixtures.MonkeyPatch("oslo_messaging.RPCClient.prepare", prepared))
