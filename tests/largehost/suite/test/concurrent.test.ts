import { afterAll, expect, test } from "bun:test";
import { report } from "./threads";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (let i = 0; i < 8; i++) {
  test.concurrent(`concurrent job ${i} hashes and waits`, async () => {
    const data = new TextEncoder().encode("x".repeat(10_000 + i));
    const digest = await crypto.subtle.digest("SHA-256", data);
    await sleep(5 * i);
    expect(new Uint8Array(digest).length).toBe(32);
  });
}

afterAll(() => report("concurrent"));
