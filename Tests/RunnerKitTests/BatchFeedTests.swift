import Foundation
import RunnerKit
import Testing

/// The feed `runner run` and `runner watch` both take jobs from: validate first, keep up to N
/// jobs, read the rest again; a change between the reads ends the same way for both.
@Suite struct BatchFeedTests {
    let folder = TemporaryFolder()

    static func line(_ key: String) -> String { #"{"kind": "probe", "key": "\#(key)", "url": "http://127.0.0.1/\#(key)"}"# }

    @Test func keptJobsRunWithoutReadingAgain() throws {
        let path = folder.write("jobs.jsonl", (1...3).map { Self.line("k\($0)") }.joined(separator: "\n") + "\n")
        let feed = BatchFeed(files: [path], registry: probeRegistry(), shard: nil, keep: 10)
        let validation = feed.validate()
        #expect(validation.errors.isEmpty && validation.total == 3)
        try FileManager.default.removeItem(atPath: path)  // gone: only the kept jobs can run
        #expect(Array(IteratorSequence(feed.makeIterator())).map(\.key) == ["k1", "k2", "k3"])
        #expect(feed.changes.isEmpty)
    }

    @Test func beyondKeepALineChangedAfterValidationIsNotRunAndIsReported() throws {
        let lines = (1...4).map { Self.line("k\($0)") }
        let path = folder.write("jobs.jsonl", lines.joined(separator: "\n") + "\n")
        let feed = BatchFeed(files: [path], registry: probeRegistry(), shard: nil, keep: 2)
        #expect(feed.validate().errors.isEmpty)
        // Line 3 is overwritten in place with something of the same length that is no job.
        var changed = lines
        changed[2] = String(repeating: "x", count: lines[2].utf8.count)
        folder.write("jobs.jsonl", changed.joined(separator: "\n") + "\n")
        #expect(Array(IteratorSequence(feed.makeIterator())).map(\.key) == ["k1", "k2", "k4"], "what still reads runs")
        #expect(feed.changes.count == 1)
        #expect(feed.changes.first?.description.contains("line 3") == true, "\(feed.changes)")
    }

    @Test func anInvalidFileKeepsNothingAndReportsEveryError() {
        let good = folder.write("good.jsonl", Self.line("a") + "\n")
        let bad = folder.write("bad.jsonl", #"{"kind": "nope", "url": "http://h/"}"# + "\n")
        let feed = BatchFeed(files: [good, bad], registry: probeRegistry())
        let validation = feed.validate()
        #expect(validation.jobs == [1, 0])
        #expect(validation.errors.count == 1)
    }
}
