"""The body of a recreate test whose fault fails a call (the driver and rpc faults).

The named call at the item's point fails in a ``mock.patch`` the test
enters around the step that makes it: a libvirt driver method of the
calling host raises ``libvirtError`` (what libvirt raises when its daemon
gives up); an ``rpcapi`` method's request is lost (a cast never arrives, a
call times out) or its reply is (the callee runs, the caller times out).
Casts are real casts (``CAST_AS_CALL = False``), so a failure reaches only
the handlers it reaches in production. Nova's own handling runs; the test
waits for the server to settle, checks every host against what the
database says it holds, then deletes the server -- what a user does with a
move that failed -- after which nothing may be held anywhere.
"""
from __future__ import annotations

#: the stub's effect, per Boundary.fails, in a sentence (the docstring, the bug text)
EFFECT = {
    "libvirt": "raises libvirtError (VIR_ERR_INTERNAL_ERROR, as when libvirt gives up)",
    "lost-call": "never reaches its callee: the caller times out (MessagingTimeout)",
    "lost-cast": "is lost: its callee never runs and its sender carries on",
    "reply": "runs on its callee, and its reply is lost: the caller times out "
             "(MessagingTimeout)",
}


#: what happens to the call, as a bug text's "When:" says it
VERB = {"libvirt": "fails", "lost-call": "is lost (its caller times out)",
        "lost-cast": "is lost", "reply": "loses its reply"}


def imports(rec) -> list:
    return ["import oslo_messaging as messaging", ""] if rec.boundary.kind == "rpc" else []


def what(rec) -> str:
    """``host-b's LibvirtDriver.destroy`` / ``ComputeAPI.finish_resize from host-b``."""
    b = rec.boundary
    return (f"{rec.caller}'s {b.short}" if b.kind == "driver"
            else f"{b.short} from {rec.caller}")


def how(rec) -> str:
    """The index's column: where the failure strikes."""
    return f"{what(rec)} {EFFECT[rec.boundary.fails].split(' (')[0].split(':')[0]}"


def test_method(rec) -> str:
    b, role = rec.boundary, rec.item.point.split(":", 1)[0]
    ending = f"_{rec.item.ending}" if rec.in_ending else ""
    if b.kind == "driver":
        return f"test_{role}_{b.method}_fails{ending}"
    return f"test_{b.method}{'_reply' if b.fails == 'reply' else ''}_lost{ending}"


def docstring_how(rec) -> str:
    return (f"{what(rec)} {EFFECT[rec.boundary.fails]}, in a stub of that call; Nova's "
            "own handling runs, then the server is deleted.")


def _stub(rec) -> list:
    """``fail``: the patch that fails the call, entered around the step making it."""
    from harness.upstream import recreate_render as r
    b = rec.boundary
    if b.kind == "driver":
        target = f"            self.computes[{rec.caller!r}].driver, {b.method!r},"
        return ["        fail = mock.patch.object(",
                *(r._fit(target, f"            self.computes[{rec.caller!r}].driver,\n"
                                 f"            {b.method!r},")),
                "            side_effect=fakelibvirt.make_libvirtError(",
                "                fakelibvirt.libvirtError,",
                f"                'internal error: {b.method} failed',",
                "                error_code=fakelibvirt.VIR_ERR_INTERNAL_ERROR,",
                "                error_domain=fakelibvirt.VIR_FROM_QEMU))"]
    if b.fails == "lost-cast":
        return ["        # the cast is lost: a stub in its place sends nothing",
                f"        fail = mock.patch(\n            '{b.path}')"]
    if b.fails == "lost-call":
        return [f"        fail = mock.patch(\n            '{b.path}',",
                "            side_effect=messaging.MessagingTimeout('lost'))"]
    return ["        call = " + f"{b.alias}.{b.owner}.{b.method}", "",
            "        def reply_lost(*args, **kwargs):",
            "            try:",
            "                call(*args, **kwargs)",
            "            except Exception:",
            "                pass  # its error went with its reply",
            "            raise messaging.MessagingTimeout('reply lost')", "",
            f"        fail = mock.patch(\n            '{b.path}',\n            reply_lost)"]


def _settle(rec, server: str, fixed: bool) -> list:
    """Wait until Nova has handled the failure: where the server rests (a lost message
    may leave it in a task state for good); a fix may rest in another status, with
    no task state."""
    from harness.upstream import recreate_render as r
    wait = []
    if rec.event and not fixed:  # the step that met the failure is over
        action, event, result = rec.event
        wait = ["            self._wait_for_instance_action_event(",
                *r._fit(f"                {server}, {action!r}, {event!r}, {result!r})",
                        f"                {server}, {action!r},\n"
                        f"                {event!r}, {result!r})")]
    elif fixed and rec.in_ending and rec.item.ending == "confirm":
        # a confirm sets no task state: the wait below would return before the
        # confirm ran; whatever a fix makes of the event, its migration ends
        wait = [f"            self._wait_for_migration_status({server}, DONE)"]
    want = ("{'OS-EXT-STS:task_state': None}" if fixed else
            f"{{'status': {rec.status!r}, 'OS-EXT-STS:task_state': {rec.task_state!r}}}")
    no_fault = not fixed and rec.status == "ERROR" and not rec.fault  # Nova recorded none
    line = f"                {server}, {want}{', wait_for_fault_key=False' if no_fault else ''})"
    if len(line) <= 79:
        return wait + [f"            {server} = self._wait_for_server_parameter(", line]
    return wait + [f"            {server} = self._wait_for_server_parameter({server}, {{",
                   f"                'status': {rec.status!r},",
                   f"                'OS-EXT-STS:task_state': {rec.task_state!r}}}"
                   + ("," if no_fault else ")"),
                   *(["                wait_for_fault_key=False)"] if no_fault else [])]


def body(rec, scen, fixed: bool) -> list:
    """Boot, the move (its ending) with the call failing, the checks, the delete."""
    from harness.upstream import recreate_render as r
    server, action = r._action(scen)
    body = ["", *_stub(rec)]
    post = [f"            self.api.post_server_action(\n                {server}['id'], "
            f"{action})"]
    disk = ["        with mock.patch(", *r._no_disk_copy()]
    if scen.operation.name == "live-migration":  # the job is _migrate_stub's
        move = scen.moves[0]
        body += [f"        self.server = {server}", "        with fail:",
                 f"            self.api.post_server_action({server}['id'], {{'os-migrateLive': {{",
                 f"                'host': {move.host!r}, 'block_migration': 'auto'}}}})"]
    elif rec.in_ending:
        ending, _ = r.ENDING_ACTION[rec.item.ending]
        body += [*disk, "        ):", *post,
                 f"            {server} = self._wait_for_state_change({server}, 'VERIFY_RESIZE')"]
        body += r._check("move", rec, fixed)
        body += ["        with fail:",
                 f"            self.api.post_server_action({server}['id'], {{'{ending}': None}})"]
    elif rec.boundary.method == "migrate_disk_and_power_off" and rec.boundary.kind == "driver":
        body += ["        with fail:", *post]  # the failing stub stands for the disk copy's
    else:
        body += [*disk, "        ), fail:", *post]
    # the failure's own face another cause's (this one is what the delete leaves):
    # both forms wait for where the server rests and assert only what is right
    fixed_failure = fixed and not r.foreign(rec, "failure")
    body += _settle(rec, server, fixed_failure)
    if rec.errored and not r.foreign(rec, "failure"):  # Nova knows where the guest runs
        if not fixed:
            body += [f"        # FIXME({r._bug(rec.cause)}): the server is in ERROR while its "
                     "guest runs", f"        # untouched on {rec.hosts.get('source')}; this "
                     "should be ACTIVE"]
        body.append(f"        self.assertEqual({'ACTIVE' if fixed else rec.status!r}, "
                    f"{server}['status'])")
    if rec.recovery is not None and not r.foreign(rec, "failure"):
        seen = (None, False, False) if fixed else rec.recovery
        if not fixed:
            body += [f"        # FIXME({r._bug(rec.cause)}): the move is left half-done; "
                     "this should be", "        # (None, False, False)"]
        body += r._fit(f"        self.assertEqual({seen!r}, self._move_left({server}))",
                       f"        self.assertEqual(\n            {seen!r},\n"
                       f"            self._move_left({server}))")
    # a fixed handling may leave another state than the one these values follow from
    if not (fixed_failure and rec.recovery is not None):
        body += r._check("failure", rec, fixed) + r._periodic_check("failure", rec, fixed,
                                                                    always=True)
    else:
        body += ["", "        self._run_periodics()"]
    body += ["", *r._deletes(scen, rec, fixed), *r._check("delete", rec, fixed)]
    if rec.guests and not r.foreign(rec, "delete"):
        body += ([] if fixed else [f"        # FIXME({r._bug(rec.cause)}): no delete reached "
                                   "these guests"])
        body.append(f"        self.assertEqual({({} if fixed else rec.guests)!r}, "
                    "self._guests())")
    return body + r._periodic_check("delete", rec, fixed)
