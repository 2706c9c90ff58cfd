"""Times the official Python AG-UI encoder (PyPI ag-ui-protocol) on 10,000 TEXT_MESSAGE_CONTENT events."""
import time

from ag_ui.core import EventType, TextMessageContentEvent
from ag_ui.encoder import EventEncoder

N = 10_000
WORDS = ["lorem ", "ipsum ", "dolor "]
events = [
    TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, message_id="01a2022b-d5ab-7221-9e11-c2a043f5f639", delta=WORDS[i % 3])
    for i in range(N)
]
encoder = EventEncoder()
best = float("inf")
for _ in range(7):
    start = time.perf_counter()
    for event in events:
        encoder.encode(event)
    best = min(best, time.perf_counter() - start)
print(f"python ag-ui-protocol EventEncoder: {N / best / 1e6:.3f} M events/s ({best / N * 1e9:.0f} ns/event)")
