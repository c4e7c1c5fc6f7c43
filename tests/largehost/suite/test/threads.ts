import { readdirSync } from "node:fs";
import os from "node:os";

// The most threads this Bun process had at any sample, across every test file of the run.
let peak = 0;
function sample(): void {
  peak = Math.max(peak, readdirSync("/proc/self/task").length);
}
sample();
setInterval(sample, 1).unref();

/** One JSON line on stdout for the host: what this file saw. */
export function report(file: string): void {
  sample();
  console.log(
    JSON.stringify({
      file,
      peakThreads: peak,
      hardwareConcurrency: navigator.hardwareConcurrency,
      cpus: os.cpus().length,
      availableParallelism: os.availableParallelism(),
    }),
  );
}
