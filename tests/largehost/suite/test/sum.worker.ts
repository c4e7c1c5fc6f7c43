declare var self: Worker;
self.onmessage = (event: MessageEvent<number>) => {
  let total = 0;
  for (let i = 1; i <= event.data; i++) total += i;
  postMessage(total);
};
