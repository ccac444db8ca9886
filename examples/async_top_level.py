# Top-level await works without ceremony; asyncio is only imported when the
# program awaits something.
import asyncio


async def fetch(i):
    await asyncio.sleep(0.01)
    return i * i


squares = await asyncio.gather(*(fetch(i) for i in range(10)))
return {"squares": squares, "sum": sum(squares)}
