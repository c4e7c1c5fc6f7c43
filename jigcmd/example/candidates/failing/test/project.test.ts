import { test, expect } from "bun:test";
import { value } from "../src/value.ts";

test("value", () => expect(value).toBe(2));
