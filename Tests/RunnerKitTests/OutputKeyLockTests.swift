import Foundation
import Glibc
@testable import RunnerKit
import RunnerTestSupport
import Testing

/// The output's key locks, in process: two engines writing to one output never run one key at
/// once, and the lock folder is never followed elsewhere.
@Suite(.timeLimit(.minutes(1)))
struct OutputKeyLockTests {
    /// Waits at its gate, then stores nothing in particular.
    struct HeldKind: JobKind {
        static let name = "held"
        static let summary = "Waits at the test's gate (for tests)."
        static let parameters: [KindParameter] = []
        let gate: Gate

        init(gate: Gate) { self.gate = gate }
        init(fields: inout JobFields) throws(JobSpecError) { gate = Gate() }

        func run(in context: JobContext) async throws -> KindOutcome {
            await gate.pass()
            return KindOutcome(.bytes(Array("held\n".utf8), httpStatus: 200), folder: "held", fileExtension: "txt")
        }
    }

    static let url = URL(string: "http://127.0.0.1/x")!

    static func engine(_ root: String, _ change: (inout JobEngine.Configuration) -> Void = { _ in }) throws -> JobEngine {
        try JobEngine(configuration: .init(store: try OutputStore(root: root), http: NoFetching()).with(change))
    }

    @Test func twoEnginesOnOneOutputNeverRunOneKeyAtOnce() async throws {
        let folder = TemporaryFolder()
        let (first, second) = (try Self.engine(folder.path), try Self.engine(folder.path))
        let gate = Gate()

        // Given the first engine running the key, held.
        async let held = first.run(JobDescriptor(HeldKind(gate: gate), key: "held:k", url: Self.url))
        await gate.waitForStarted(1)

        // When the second engine is handed the same key, it ends it duplicate without running it.
        let refused = await second.run(JobDescriptor(HeldKind(gate: gate), key: "held:k", url: Self.url))
        #expect(refused.status == .duplicate && refused.reason == .duplicate)
        #expect(refused.error == "a task with the key 'held:k' is already running in another process or engine")
        #expect(gate.started == 1, "the second never ran it")
        let other = await second.run(JobDescriptor(ProbeKind(), key: "probe:other", url: Self.url))
        #expect(other.status == .succeeded, "other keys run")

        // Then the first ends as it would alone, its record not overwritten, and the key is free.
        gate.open()
        let heldStatus = await held.status
        #expect(heldStatus == .succeeded)
        #expect(try OutputStore(root: folder.path).readRecord(forKey: "held:k")?["status"] == .string("succeeded"))
        #expect(await second.run(JobDescriptor(HeldKind(gate: gate), key: "held:k", url: Self.url)).status == .succeeded)
        #expect(FileSystem.names(in: folder.path + "/.locks").isEmpty, "a lock lives only while its job runs")
    }

    @Test func withoutTheOutputsLockTwoEnginesWouldRunOneKeyTogether() async throws {
        let folder = TemporaryFolder()
        let first = try Self.engine(folder.path)
        let second = try Self.engine(folder.path) { $0.locksKeysInOutput = false }
        let gate = Gate()
        async let held = first.run(JobDescriptor(HeldKind(gate: gate), key: "held:k", url: Self.url))
        await gate.waitForStarted(1)
        async let again = second.run(JobDescriptor(HeldKind(gate: gate), key: "held:k", url: Self.url))
        await gate.waitForStarted(2)
        gate.open()
        let (heldStatus, againStatus) = await (held.status, again.status)
        #expect(heldStatus == .succeeded && againStatus == .succeeded)
    }

    /// The lock folder is held open between jobs; one removed meanwhile is made again.
    @Test func aLockFolderRemovedBetweenJobsIsMadeAgain() async throws {
        let folder = TemporaryFolder()
        let engine = try Self.engine(folder.path)
        let first = await engine.run(JobDescriptor(ProbeKind(), key: "probe:a", url: Self.url))
        #expect(first.status == .succeeded)
        try FileManager.default.removeItem(atPath: folder.path + "/.locks")
        let second = await engine.run(JobDescriptor(ProbeKind(), key: "probe:b", url: Self.url))
        #expect(second.status == .succeeded, "\(second.error ?? "")")
        #expect(FileSystem.entry(folder.path + "/.locks")?.type == .directory)
    }

    /// A link planted at `.locks` (an output others may write to) is removed, never followed:
    /// the file of the same name where it pointed keeps its bytes.
    @Test func aLinkPlantedAtTheLockFolderIsNeverFollowed() async throws {
        let folder = TemporaryFolder()
        let out = folder.path + "/out"
        let elsewhere = folder.path + "/elsewhere"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let victim = folder.write("elsewhere/\(OutputStore.fileName(forKey: "probe:k"))", "precious")
        #expect(symlink(elsewhere, out + "/.locks") == 0)

        let result = await (try Self.engine(out)).run(JobDescriptor(ProbeKind(), key: "probe:k", url: Self.url))

        #expect(result.status == .succeeded, "\(result.error ?? "")")
        #expect((try? String(contentsOfFile: victim, encoding: .utf8)) == "precious")
        #expect(FileSystem.entry(out + "/.locks")?.type == .directory)
    }
}

/// A fetcher for jobs that never fetch.
private struct NoFetching: HTTPFetching {
    struct Unused: Error {}
    func fetch(_ request: FetchRequest, into body: any BodySink) async throws -> FetchResponseHead { throw Unused() }
}
