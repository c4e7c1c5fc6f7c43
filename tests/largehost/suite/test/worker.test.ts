import { afterAll, expect, test } from "bun:test";
import { report } from "./threads";

// Emulated (TCG), pinned to one of 32 CPUs, a Worker's start has taken longer than Bun's
// default 5 s per test; the suite is here for its threads and its containment, not its speed.
const EMULATED_TIMEOUT_MS = 60_000;

test("a Worker computes a sum off the main thread", async () => {
  const worker = new Worker(new URL("./sum.worker.ts", import.meta.url).href);
  const answer = await new Promise<number>((resolve, reject) => {
    worker.onmessage = (event: MessageEvent<number>) => resolve(event.data);
    worker.onerror = (event) => reject(new Error(String(event.message)));
    worker.postMessage(1000);
  });
  worker.terminate();
  expect(answer).toBe(500500);
}, EMULATED_TIMEOUT_MS);

afterAll(() => report("worker"));
