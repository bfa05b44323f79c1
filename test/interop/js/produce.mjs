// Produces JSON records with kafkajs, as an application would, and prints each record
// with the partition and offset Kafka acknowledged, one JSON object a line. The Go test
// (../interop_test.go) reads them back from Kafka and compares every reader's rows with
// them.
//
// Environment: INTEROP_BROKERS (host:port,...), INTEROP_TOPIC, INTEROP_PARTITIONS,
// INTEROP_COUNT.
import { Kafka, logLevel } from 'kafkajs'

const env = (name) => {
  const v = process.env[name]
  if (!v) throw new Error(`${name} is not set`)
  return v
}
const brokers = env('INTEROP_BROKERS').split(',')
const topic = env('INTEROP_TOPIC')
const partitions = Number(env('INTEROP_PARTITIONS'))
const count = Number(env('INTEROP_COUNT'))

const cities = ['Lisbon', 'Osaka', 'Quito', null, 'Zürich', 'Łódź']
// The record of id i: every column type of the table, with nulls, non-ASCII text and
// values a double must carry exactly; the instant has millisecond precision, which every
// reader's timestamp type keeps.
function record(i) {
  const ts = new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 0) + i * 1234567)
  return {
    id: i,
    name: `item ${i} ✓`,
    price: i % 7 === 0 ? null : i * 0.25 + 0.1,
    active: i % 3 === 0,
    qty: i % 5 === 0 ? null : (i * 37) % 1000 - 500,
    geo: { city: cities[i % cities.length] },
    ts: ts.toISOString(),
  }
}

const kafka = new Kafka({ clientId: 'mink-interop', brokers, logLevel: logLevel.WARN, retry: { retries: 8 } })
const producer = kafka.producer({ allowAutoTopicCreation: false })
await producer.connect()
try {
  const messages = []
  for (let i = 1; i <= count; i++) {
    messages.push({ partition: i % partitions, key: `k${i}`, value: JSON.stringify(record(i)) })
  }
  // One send a partition, so each acknowledged base offset numbers its records in order.
  for (let p = 0; p < partitions; p++) {
    const batch = messages.filter((m) => m.partition === p)
    if (batch.length === 0) continue
    const [ack] = await producer.send({ topic, acks: -1, messages: batch })
    if (ack.errorCode !== 0 || ack.partition !== p) throw new Error(`produce to ${topic}/${p}: ${JSON.stringify(ack)}`)
    batch.forEach((m, j) => {
      const offset = BigInt(ack.baseOffset) + BigInt(j)
      process.stdout.write(JSON.stringify({ partition: p, offset: offset.toString(), key: m.key, value: m.value }) + '\n')
    })
  }
} finally {
  await producer.disconnect()
}
