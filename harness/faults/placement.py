"""``placement:409`` / ``placement:503``: the placement request a compute makes at
the point gets an error answer instead of reaching placement.

- ``409``: placement's own ``placement.concurrent_update`` conflict, what a
  concurrent writer causes: of the consumer for an allocation write, of the
  provider otherwise (Nova's tests use it the same way; Nova retries the
  second and gives up on the first); on a GET it means nothing, so GETs are
  not struck.
- ``503``: placement unreachable behind its load balancer (haproxy's HTML
  page, not a placement error document): every verb.

The answer is a ``requests.Response`` handed back by the report client's
keystoneauth adapter (Nova's is ``raise_exc=False``), so Nova's own status
handling runs: its retries, its exceptions, its decorators. The move may
absorb the error and go on (the item then runs its ending, judged as
always) or fail (:mod:`harness.faults.aftermath`): the run then checks what
Nova left against the database's ledger, deletes every server and checks
that nothing is held (:mod:`harness.explore.recovery`), as the driver fault.

Only a compute's own requests are points (the conductor's and scheduler's
run on no host): the conductor's allocation swap is not struck yet.
"""
import fixtures

from harness.faults import aftermath
from harness.explore import point_ids
from harness.faults.base import Fault

#: placement's conflict document; what conflicted depends on what the request writes
CONFLICT = ('{"errors": [{"status": 409, "title": "Conflict", "code": '
            '"placement.concurrent_update", "detail": "There was a conflict when trying to '
            'complete your request.\\n\\n %s  ", "request_id": "req-nova-chaos"}]}')
ANSWERS = {
    409: ("Conflict", "application/json", CONFLICT),
    503: ("Service Unavailable", "text/html",
          "<html><body><h1>503 Service Unavailable</h1>\nNo server is available to "
          "handle this request.\n</body></html>\n"),
}


def conflict(url: str) -> str:
    """What a concurrent writer conflicts on: an allocation write checks its consumer's
    generation (placement retries a provider generation conflict there itself); an
    inventory, trait or aggregate write checks the provider's."""
    return ("consumer generation conflict" if "/allocations" in url
            else "resource provider generation conflict")


class Placement(Fault):
    kind = "placement"
    glob = "placement:*"
    periodic = False
    label = "placement request failed on"
    recreatable = False
    summary = ("placement:409|placement:503: the compute's placement request at the point "
               "answers a concurrent-update conflict or service unavailable; a failed move's "
               "servers are then deleted")

    def __init__(self, spec: str, status: int):
        super().__init__(spec)
        self.status = status

    @classmethod
    def parse(cls, spec: str):
        kind, _, status = spec.partition(":")
        if kind != cls.kind or status not in {str(s) for s in ANSWERS}:
            return None
        return cls(spec, int(status))

    @property
    def memoizable(self):
        return False  # the run leaves the traced path at the point: nothing to inherit

    def arm(self, injector):
        return PlacementStrike(injector, self.status)

    def strikes(self, scen, point_id, targets):
        """The host whose request it is; a conflict only where the request writes."""
        label = point_ids.callee(point_id)
        if not label.startswith("placement.") or (self.status == 409 and label.endswith("GET")):
            return []
        return self.calling_host(scen, point_id, targets)

    def missed(self, fired_at, hosts, reached):
        return aftermath.unsent(fired_at, "no placement request")


class PlacementStrike(aftermath.ArmedStrike):
    """The striking thread's next placement request gets the error answer."""

    def __init__(self, injector, status):
        super().__init__(injector)
        self.status = status
        self.pending, self.failing = f"to answer {status}", f"answered {status}"

    def install(self):
        super().install()
        self.injector.useFixture(fixtures.MonkeyPatch(
            "keystoneauth1.adapter.Adapter.request", self._adapter_request()))

    def _adapter_request(self):
        from keystoneauth1 import adapter
        real = adapter.Adapter.request
        strike = self

        def request(adapter_self, url, method, **kwargs):
            if strike.take(strike.failing):
                return strike._answer(url)
            return real(adapter_self, url, method, **kwargs)
        return request

    def _answer(self, url):
        import requests
        reason, media, body = ANSWERS[self.status]
        if self.status == 409:
            body = body % conflict(str(url))
        resp = requests.Response()
        resp.status_code, resp.reason, resp.url = self.status, reason, str(url)
        resp.headers["Content-Type"] = media
        resp._content = body.encode()
        return resp
