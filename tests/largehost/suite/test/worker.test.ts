import { afterAll, expect, test } from "bun:test";
import { report } from "./threads";

test("a Worker computes a sum off the main thread", async () => {
  const worker = new Worker(new URL("./sum.worker.ts", import.meta.url).href);
  const answer = await new Promise<number>((resolve, reject) => {
    worker.onmessage = (event: MessageEvent<number>) => resolve(event.data);
    worker.onerror = (event) => reject(new Error(String(event.message)));
    worker.postMessage(1000);
  });
  worker.terminate();
  expect(answer).toBe(500500);
});

afterAll(() => report("worker"));
