// A Node.js cesar client: node client.js ADDRESS QUERY_FILE EVENTS_JSON
// Subscribes QUERY_FILE, publishes the events (a JSON array of cesar.v1.Event objects) in one
// PublishBatch that closes its last epoch, then Listens from seq 0 and prints each alert as a
// JSON line until it has as many as the subscription's last_seq.
const fs = require("fs");
const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const [address, queryFile, eventsFile] = process.argv.slice(2);
const protoRoot = path.resolve(__dirname, "../../../proto");
const definition = protoLoader.loadSync("cesar/v1/cesar.proto", {
  includeDirs: [protoRoot],
  keepCase: true,
  longs: Number,
  defaults: true,
  oneofs: true,
});
const cesar = grpc.loadPackageDefinition(definition).cesar.v1;
const client = new cesar.Cesar(address, grpc.credentials.createInsecure());
const call = (method, request) =>
  new Promise((resolve, reject) =>
    client[method](request, (error, reply) => (error ? reject(error) : resolve(reply))),
  );

async function main() {
  const subscription = await call("Subscribe", { query: fs.readFileSync(queryFile, "utf8") });
  const events = JSON.parse(fs.readFileSync(eventsFile, "utf8"));
  const ack = await call("PublishBatch", {
    events,
    watermark: Math.max(...events.map((e) => e.t1)),
  });
  if (ack.rejected.length) throw new Error(JSON.stringify(ack.rejected));
  const { subscriptions } = await call("ListSubscriptions", {});
  const expected = subscriptions.find((s) => s.id === subscription.id).last_seq;
  let seen = 0;
  const stream = client.Listen({ after_seq: { [subscription.id]: 0 } });
  stream.on("data", (batch) => {
    for (const alert of batch.alerts) {
      const attrs = {};
      for (const [name, value] of Object.entries(alert.event.attributes)) {
        attrs[name] = value[value.kind];
      }
      const { stream: name, t0, t1 } = alert.event;
      console.log(JSON.stringify({ subscription: alert.subscription, seq: alert.seq, stream: name, t0, t1, attrs }));
      seen += 1;
    }
    if (seen >= expected) stream.cancel();
  });
  stream.on("error", (error) => {
    if (error.code !== grpc.status.CANCELLED) {
      console.error(error);
      process.exit(1);
    }
    client.close();
  });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
