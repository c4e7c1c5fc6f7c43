// Starts Workers without end, each blocked for good (each holds a thread without burning the
// CPU, so the bomb reaches the limit quickly even on an emulated machine): the envelope's
// pids limit must hold it.
const workers: Worker[] = [];
for (let i = 0; i < 1000; i++) {
  try {
    workers.push(new Worker("data:text/javascript,Atomics.wait(new Int32Array(new SharedArrayBuffer(4)),0,0)"));
  } catch {
    break;
  }
}
console.log(workers.length);
process.exit(0);
