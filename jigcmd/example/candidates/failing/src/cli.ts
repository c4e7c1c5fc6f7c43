// Reads records from stdin and reports them with the arguments it was given.
const input = await Bun.stdin.text();
const records = input.split("\n").filter((line) => line.length > 0);
console.log(JSON.stringify({ args: process.argv.slice(2), records }));
