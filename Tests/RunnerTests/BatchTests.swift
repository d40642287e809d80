import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// Cron-friendly batches: revalidation, stale fallback, forget, one run per output directory,
/// shards and the per-host cap, through the built binary.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(2)))
struct BatchTests {
    @Test func aSecondRunRevalidatesAndKeepsThePayload() async throws {
        let w = try Workspace()
        w.write("tree.json", #"{"kind": "tree", "key": "tree:t", "url": "\#(w.base)/data.json", "entries": "\#(w.base)/entries/{id}.json"}"#)
        let first = try await w.run(["run", "tree.json"])
        #expect(first.status == 0, "\(first.stderr)")
        let firstRecord = try w.record("entry:imgly.A.1")
        #expect(firstRecord["validators"]?["etag"]?.stringValue != nil)
        let payloadBefore = try #require(w.payload("entries/imgly.A.1.json"))
        let modified = try FileManager.default.attributesOfItem(atPath: "\(w.out)/entries/imgly.A.1.json")[.modificationDate] as? Date

        let second = try await w.run(["run", "tree.json"])
        #expect(second.status == 0, "notModified counts as success: \(second.stderr)")
        let tree = try w.record("tree:t")
        #expect(tree["status"] == .string("notModified"))
        #expect(tree["httpStatus"]?.intValue == 304)
        let missing = FixtureCatalog.missingEntryIDs.count
        #expect(tree["details"]?["children"] == .object([
            ("notModified", JSONValue(FixtureCatalog.treeLeafCount - missing)), ("notFound", JSONValue(missing)),
        ]), "a tree that did not change still revalidates its entries")
        let entry = try w.record("entry:imgly.A.1")
        #expect(entry["status"] == .string("notModified"))
        #expect(entry["output"] == firstRecord["output"])
        #expect(entry["sha256"] == firstRecord["sha256"])
        #expect(w.payload("entries/imgly.A.1.json") == payloadBefore)
        let after = try FileManager.default.attributesOfItem(atPath: "\(w.out)/entries/imgly.A.1.json")[.modificationDate] as? Date
        #expect(after == modified, "the payload was not rewritten")
    }

    @Test func aFailureAfterAGoodRunPointsAtTheStalePayload() async throws {
        let w = try Workspace()
        w.write("ok.json", #"{"kind": "image", "key": "cat", "url": "\#(w.base)/images/png.png"}"#)
        w.write("broken.json", #"{"kind": "image", "key": "cat", "url": "\#(w.base)/images/png.png?status=500"}"#)
        w.write("offline.json", #"{"kind": "image", "key": "cat", "url": "\#(w.base)/images/png.png?hang=1", "timeout": 0.3}"#)
        #expect(try await w.run(["run", "ok.json"]).status == 0)
        let good = try #require(w.payload("images/cat.png"))
        for file in ["broken.json", "offline.json"] {
            let result = try await w.run(["run", file])
            #expect(result.status == 4)
            let record = try w.record("cat")
            #expect(record["stale"] == .bool(true), "\(file)")
            #expect(record["output"] == .string("images/cat.png"))
            #expect(w.payload("images/cat.png") == good)
        }
        #expect(try w.status("cat") == "timedOut")
    }

    @Test func jobsOfOneKeyRunOneAfterAnotherAndAFailureRightAfterAGoodOneIsStale() async throws {
        // One at a time: each job of the key starts as soon as the one before let go of its slot.
        // It must neither find the key still running (duplicate) nor miss the record before it.
        let w = try Workspace()
        let pair = """
            {"kind": "image", "key": "cat", "url": "\(w.base)/images/png.png"}
            {"kind": "image", "key": "cat", "url": "\(w.base)/images/png.png?status=500"}
            """
        w.write("twice.jsonl", Array(repeating: pair, count: 10).joined(separator: "\n"))
        let result = try await w.run(["run", "twice.jsonl", "--concurrency", "1", "--json"])
        #expect(result.status == 1)
        let statuses = result.stdout.split(separator: "\n").compactMap { try? JSONParser.parse(String($0))["status"]?.stringValue }
        // A good job after the first may revalidate (notModified) when the record before it is
        // already on disk: records are queued, not awaited, in a batch.
        #expect(statuses.count == 20 && !statuses.contains("duplicate"), "\(statuses)")
        for (index, status) in statuses.enumerated() {
            #expect(index % 2 == 1 ? status == "failed" : status == "succeeded" || status == "notModified", "job \(index): \(status)")
        }
        let record = try w.record("cat")
        #expect(record["status"] == .string("failed"))
        #expect(record["stale"] == .bool(true))
        #expect(record["output"] == .string("images/cat.png"))
    }

    @Test func forgetRemovesPayloadRecordAndValidators() async throws {
        let w = try Workspace()
        w.write("jobs.json", """
            [{"kind": "entry", "id": "imgly.A.1", "url": "\(w.base)/entries/{id}.json"},
             {"kind": "entry", "id": "imgly.A.2", "url": "\(w.base)/entries/{id}.json"}]
            """)
        #expect(try await w.run(["run", "jobs.json"]).status == 0)
        let forget = try await w.run(["forget", "entry:imgly.A.1"])
        #expect(forget.status == 0)
        #expect(forget.stdout.contains("entries/imgly.A.1.json"))
        #expect(w.payload("entries/imgly.A.1.json") == nil)
        #expect((try? w.record("entry:imgly.A.1")) == nil)
        _ = try await w.run(["run", "jobs.json"])
        #expect(try w.status("entry:imgly.A.1") == "succeeded", "fetched afresh")
        #expect(try w.status("entry:imgly.A.2") == "notModified")

        let unknown = try await w.run(["forget", "entry:nope"])
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("entry:nope"))
        let all = try await w.run(["forget", "--all"])
        #expect(all.status == 0)
        #expect(w.outputFiles().filter { $0.hasPrefix("results/") || $0.hasPrefix("entries/") }.isEmpty)
    }

    @Test func aSecondRunOnTheSameOutputExits3OrWaits() async throws {
        let w = try Workspace()
        w.write("slow.json", #"{"kind": "entry", "id": "imgly.A.1", "key": "slow", "url": "\#(w.base)/entries/{id}.json?delay=1500"}"#)
        w.write("quick.json", #"{"kind": "entry", "id": "imgly.A.2", "url": "\#(w.base)/entries/{id}.json"}"#)
        async let slow = w.run(["run", "slow.json"])
        // Until the slow run holds the lock: it writes its process id into the lock file then
        // (a fixed pause was too short when other tests were starting processes too).
        let limit = ContinuousClock.now.advanced(by: .seconds(10))
        while (try? String(contentsOfFile: "\(w.out)/.lock", encoding: .utf8))?.isEmpty ?? true, ContinuousClock.now < limit {
            try await Task.sleep(for: .milliseconds(20))
        }
        let busy = try await w.run(["run", "quick.json"])
        #expect(busy.status == 3)
        #expect(busy.stderr.contains("another runner is using the output directory"), "\(busy.stderr)")
        let waited = try await w.run(["run", "quick.json", "--wait"])
        #expect(waited.status == 0)
        #expect(try await slow.status == 0)
        #expect(try w.status("entry:imgly.A.2") == "succeeded")
    }

    @Test func shardsNeverOverlapAndMakeTheWholeBatch() async throws {
        let w = try Workspace()
        let lines = (0..<60).map { #"{"kind": "entry", "id": "imgly.A.1", "key": "k\#($0)", "url": "\#(w.base)/entries/{id}.json"}"# }
        w.write("batch.jsonl", lines.joined(separator: "\n"))
        var seen: [Set<String>] = []
        for index in 0..<3 {
            let result = try await w.run(["run", "batch.jsonl", "--shard", "\(index)/3", "--json", "--out", "out\(index)"])
            #expect(result.status == 0)
            let keys = result.stdout.split(separator: "\n").compactMap { try? JSONParser.parse(String($0))["key"]?.stringValue }
            #expect(Set(keys).allSatisfy { Shard(index: index, count: 3)!.contains(key: $0) })
            seen.append(Set(keys))
        }
        #expect(seen[0].isDisjoint(with: seen[1]) && seen[0].isDisjoint(with: seen[2]) && seen[1].isDisjoint(with: seen[2]))
        #expect(seen[0].union(seen[1]).union(seen[2]) == Set((0..<60).map { "k\($0)" }))
        #expect(seen.allSatisfy { !$0.isEmpty })
        let bad = try await w.run(["run", "batch.jsonl", "--shard", "3/3"])
        #expect(bad.status == 2)
    }

    @Test func aBatchPastTheKeptJobsIsReadAgainToRun() async throws {
        // More lines than `runner run` keeps from validation (10 000), so the jobs run from a
        // second read of the file; the shard keeps the fetches few.
        let w = try Workspace()
        let count = 10_100
        let lines = (0..<count).map { #"{"kind": "entry", "id": "imgly.A.1", "key": "k\#($0)", "url": "\#(w.base)/entries/{id}.json"}"# }
        w.write("batch.jsonl", lines.joined(separator: "\n"))
        let shard = Shard(index: 0, count: 200)!
        let expected = Set((0..<count).map { "k\($0)" }.filter { shard.contains(key: $0) })
        let result = try await w.run(["run", "batch.jsonl", "--shard", "0/200", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let keys = result.stdout.split(separator: "\n").compactMap { try? JSONParser.parse(String($0))["key"]?.stringValue }
        #expect(keys.count == expected.count && Set(keys) == expected, "\(keys.count) of \(expected.count)")

        // A bad last line still stops everything before anything runs.
        w.write("bad.jsonl", (lines + [#"{"kind": "entry"}"#]).joined(separator: "\n"))
        let bad = try await w.run(["run", "bad.jsonl", "--shard", "0/200", "--out", "out-bad"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("line \(count + 1)"), "\(bad.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(w.root)/out-bad/results/k0.json"))
    }

    @Test func perHostCapsConnectionsToOneHost() async throws {
        let w = try Workspace()
        let lines = (0..<6).map { #"{"kind": "entry", "id": "imgly.A.1", "key": "k\#($0)", "url": "\#(w.base)/entries/{id}.json?delay=300"}"# }
        w.write("batch.jsonl", lines.joined(separator: "\n"))
        let clock = ContinuousClock()
        let start = clock.now
        #expect(try await w.run(["run", "batch.jsonl", "--per-host", "2", "--concurrency", "6"]).status == 0)
        let capped = start.duration(to: clock.now)
        #expect(capped >= .milliseconds(880), "six 300 ms fetches, two at a time, take three rounds: \(capped)")
    }

    @Test func pipedOutputHasNoProgressLineButASummary() async throws {
        let w = try Workspace()
        w.write("jobs.json", #"[{"kind": "entry", "id": "imgly.A.1", "url": "\#(w.base)/entries/{id}.json"}, {"kind": "image", "url": "\#(w.base)/images/gif.gif"}]"#)
        let result = try await w.run(["run", "jobs.json"])
        #expect(!result.stdout.contains("\r"))
        #expect(result.stdout.contains("2 jobs: 2 succeeded."))
        #expect(result.stdout.contains("Slowest: "))
    }
}

@Suite struct ShardTests {
    @Test func everyKeyIsInExactlyOneShard() {
        for count in [1, 2, 3, 7] {
            for i in 0..<500 {
                let key = "entry:\(i)"
                #expect((0..<count).filter { Shard(index: $0, count: count)!.contains(key: key) }.count == 1)
            }
        }
    }

    @Test func theHashIsFNV1a() {
        #expect(Shard.hash("") == 0xcbf2_9ce4_8422_2325)
        #expect(Shard.hash("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(Shard("1/4") == Shard(index: 1, count: 4))
        #expect(Shard("4/4") == nil && Shard("-1/2") == nil && Shard("x") == nil)
    }
}
