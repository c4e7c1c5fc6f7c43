// `@jigging/jig` as jigcmd evaluates a Binding (shipped by jigcmd, never the real package):
// each definer snapshots its argument as plain JSON data and hands it back, branded, so the
// evaluator can tell a definer's result from anything else a module exports. Nothing is
// validated here beyond the snapshot: jigcmd applies the Binding rules to the JSON itself.

const defined = new WeakMap();

export function defineBinding(input) {
  return brand("binding", snapshot(input, "Binding definition"));
}

export function defineJig(input) {
  return brand("jig", snapshot(input, "Jig definition"));
}

export function discover(roots) {
  const values = typeof roots === "string" ? [roots] : snapshot(roots, "roots");
  if (!Array.isArray(values) || values.some((root) => typeof root !== "string")) {
    throw new TypeError("discover() roots must be a string or an array of strings");
  }
  if (values.length === 0) throw new TypeError("discover() requires at least one root");
  return Object.freeze({ kind: "discover", roots: Object.freeze([...values]) });
}

/** What a definer returned for `value`, as {kind, data}; undefined for anything else. */
export function definition(value) {
  return typeof value === "object" && value !== null ? defined.get(value) : undefined;
}

function brand(kind, data) {
  const result = Object.freeze({ ...data });
  defined.set(result, Object.freeze({ kind, data }));
  return result;
}

function snapshot(value, label, active = new WeakSet()) {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (!Number.isFinite(value) || (Number.isInteger(value) && !Number.isSafeInteger(value))) {
      throw new TypeError(`${label} contains an invalid JSON/1 number`);
    }
    return value;
  }
  if (typeof value !== "object") throw new TypeError(`${label} contains a non-JSON value`);
  if (active.has(value)) throw new TypeError(`${label} contains a cycle`);
  active.add(value);
  try {
    const keys = Reflect.ownKeys(value);
    if (keys.some((key) => typeof key === "symbol")) {
      throw new TypeError(`${label} contains a symbol property`);
    }
    if (Array.isArray(value)) {
      if (Object.getPrototypeOf(value) !== Array.prototype) {
        throw new TypeError(`${label} contains an array subclass`);
      }
      const length = value.length;
      if (keys.length !== length + 1) {
        throw new TypeError(`${label} contains a sparse or extended array`);
      }
      const output = [];
      for (let index = 0; index < length; index += 1) {
        const descriptor = Object.getOwnPropertyDescriptor(value, String(index));
        if (descriptor === undefined || !("value" in descriptor)) {
          throw new TypeError(`${label} contains a sparse or accessor-backed array`);
        }
        output.push(snapshot(descriptor.value, label, active));
      }
      return output;
    }
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) {
      throw new TypeError(`${label} contains a non-plain object`);
    }
    const output = {};
    for (const key of keys) {
      const descriptor = Object.getOwnPropertyDescriptor(value, key);
      if (!("value" in descriptor) || !descriptor.enumerable) {
        throw new TypeError(`${label} contains an accessor or hidden property`);
      }
      Object.defineProperty(output, key, {
        value: snapshot(descriptor.value, label, active),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return output;
  } finally {
    active.delete(value);
  }
}
