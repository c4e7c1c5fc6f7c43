import { afterAll, expect, test } from "bun:test";
import { report } from "./threads";

test("JSON round-trips a nested document", () => {
  const doc = { a: [1, 2, { b: "c" }], d: { e: null } };
  expect(JSON.parse(JSON.stringify(doc))).toEqual(doc);
});

test("a thousand records sort by key", () => {
  const items = Array.from({ length: 1_000 }, (_, i) => ({ key: (i * 7919) % 1_000 }));
  items.sort((x, y) => x.key - y.key);
  expect(items.map((x) => x.key)).toEqual(Array.from({ length: 1_000 }, (_, i) => i));
});

afterAll(() => report("data"));
