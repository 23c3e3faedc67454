"""A Control Interface app written with the released Python SDK (ankaios-sdk 1.0.1), run by
spec/ankaios as a host process that sees a workload's Control Interface folder at the SDK's path.
It says what it did as one JSON object a line; a line on stdin makes it ask for the state once more."""
import json
import sys
import time

from ankaios_sdk import Ankaios, AnkaiosLogLevel, Workload

other_agent = sys.argv[1]


def say(**what):
    print(json.dumps(what), flush=True)


with Ankaios(AnkaiosLogLevel.WARN) as ank:
    state = ank.get_state(["desiredState.workloads"])
    say(step="state", workloads=sorted(w.name for w in state.get_workloads()))
    events = ank.register_event([f"workloadStates.{other_agent}"])
    say(step="subscribed")
    workload = (
        Workload.builder()
        .workload_name("from_sdk")
        .agent_name(other_agent)
        .runtime("podman")
        .restart_policy("NEVER")
        .runtime_config(
            'image: localhost/busybox:latest\n'
            'commandOptions: ["--stop-timeout", "1"]\n'
            'commandArgs: ["/bin/sleep", "1000"]\n'
        )
        .build()
    )
    ank.apply_workload(workload)
    say(step="applied")
    # The first entry may be the state as it was at the subscription, with nothing altered.
    altered = []
    while not altered:
        event = events.get(timeout=60)
        altered = sorted(list(event.added_fields) + list(event.updated_fields))
    say(step="event", altered=altered)
    sys.stdin.readline()
    # As an app would: while the SDK says Hello to the restarted agent again, a request may not go through yet.
    for attempt in range(20):
        try:
            state = ank.get_state(["desiredState.workloads"], timeout=5)
            break
        except Exception as e:  # pylint: disable=broad-exception-caught
            print(f"attempt {attempt}: {e!r}", file=sys.stderr, flush=True)
            time.sleep(1)
    say(step="again", workloads=sorted(w.name for w in state.get_workloads()))
