"""A failure handler for test_lifecycle: logs what it was given, shuts the function down."""

from __future__ import annotations

import json
import os

from sparkfn import FailureInfo, FunctionFailure, Response


def handle(failure: FunctionFailure, info: FailureInfo) -> Response:
    """Record the call; answer SHUTDOWN_FUNCTION (the default would replace the instance)."""
    line = {
        "type": failure.cause.type,
        "message": failure.cause.message,
        "instances": info.instance_ids,
        "fatal": info.fatal,
        "restarts": info.restarts,
    }
    with open(os.environ["SPARKFN_TEST_HANDLER_LOG"], "a") as f:
        f.write(json.dumps(line) + "\n")
    return Response.SHUTDOWN_FUNCTION
