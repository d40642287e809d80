import Foundation
import RunnerKinds
import RunnerKit
import RunnerTesting
import Synchronization
import Testing

/// What an executable kind's program writes to stderr reaches the job's observers, line by
/// line, and nothing of it is written to the process's own stderr.
@Suite(.timeLimit(.minutes(1)))
struct KindLogTests {
    /// Every call it hears of logged lines and notices, in order.
    final class Heard: RunObserver {
        let lines = Mutex<[String]>([])
        func jobLog(_ job: JobDescriptor, line: String) { lines.withLock { $0.append("log \(job.key): \(line)") } }
        func jobNotice(_ job: JobDescriptor, message: String) { lines.withLock { $0.append("notice \(job.key): \(message)") } }
    }

    @Test func aProgramsStderrReachesTheObserversLineByLine() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kind-log-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: "\(folder)/kinds", withIntermediateDirectories: true)
        try #"{"kind": "talk", "key": "talk:{name}", "parameters": {"name": {"type": "string", "required": true}}, "exec": ["sh", "talk.sh"], "fetch": true}"#
            .write(toFile: "\(folder)/kinds/talk.json", atomically: true, encoding: .utf8)
        try """
            cat >/dev/null
            echo "looking at the payload" >&2
            echo >&2
            printf 'the last words, with no line break' >&2
            echo '{"status": "succeeded"}'
            """.write(toFile: "\(folder)/kinds/talk.sh", atomically: true, encoding: .utf8)
        let registry = try KindFolders.registry(folders: ["\(folder)/kinds"])
        let http = RecordingHTTP()
        http.script("https://example.test/t", .ok("hello"))
        let heard = Heard()
        let engine = try JobEngine(
            configuration: .init(registry: registry, store: try OutputStore(root: "\(folder)/out"), http: http), observer: heard)
        let job = try JobDescriptor.decode(
            [("kind", .string("talk")), ("name", .string("one")), ("url", .string("https://example.test/t"))], registry: registry)

        let result = await engine.run(job)

        #expect(result.status == .succeeded, "\(result.error ?? "")")
        #expect(heard.lines.withLock { $0 } == [
            "log talk:one: looking at the payload",
            "log talk:one: ",
            "log talk:one: the last words, with no line break",
        ])
    }
}
