import Foundation
import Glibc
@testable import RunnerKit
import RunnerTestSupport
import Testing

/// The output's key locks, in process: two engines writing to one output never run one key at
/// once (each has its own open file description of `.locks/keys`), and neither the lock folder
/// nor the lock file is followed elsewhere.
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
        // A lock lives only while its job runs: another open file description takes it now.
        let probe = OutputKeyLock(folder: folder.path + "/.locks")
        guard case .acquired(let release) = probe.lock(key: "held:k") else {
            Issue.record("the key's byte is still locked after its job ended")
            return
        }
        release()
    }

    @Test func twoLocksOfOneFolderExcludeEachOtherByKeyOnly() throws {
        let folder = TemporaryFolder()
        let (first, second) = (OutputKeyLock(folder: folder.path + "/.locks"), OutputKeyLock(folder: folder.path + "/.locks"))
        guard case .acquired(let releaseA) = first.lock(key: "a") else { throw Failure("the first lock of a was refused") }
        #expect(isHeldElsewhere(second.lock(key: "a")))
        guard case .acquired(let releaseB) = second.lock(key: "b") else { throw Failure("b was refused while only a was held") }
        releaseA()
        guard case .acquired(let releaseA2) = second.lock(key: "a") else { throw Failure("a was refused once let go of") }
        #expect(isHeldElsewhere(first.lock(key: "b")))
        releaseB()
        releaseA2()
        #expect(FileSystem.names(in: folder.path + "/.locks") == ["keys"], "one file for every key, kept")
        #expect(OutputKeyLock.offset(of: "a") != OutputKeyLock.offset(of: "b"))
        #expect(OutputKeyLock.offset(of: "a") == OutputKeyLock.offset(of: "a") && OutputKeyLock.offset(of: "a") >= 0)
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

    /// The lock file is held open between jobs; one removed meanwhile is made again, and an
    /// engine that opened the old one locks the new one: two engines never lock two files.
    @Test func aLockFolderRemovedBetweenJobsIsMadeAgainAndStillExcludes() async throws {
        let folder = TemporaryFolder()
        let engine = try Self.engine(folder.path)
        let first = await engine.run(JobDescriptor(ProbeKind(), key: "probe:a", url: Self.url))
        #expect(first.status == .succeeded)
        try FileManager.default.removeItem(atPath: folder.path + "/.locks")
        // Another engine makes the file anew and holds a key in it.
        let other = try Self.engine(folder.path)
        let gate = Gate()
        async let held = other.run(JobDescriptor(HeldKind(gate: gate), key: "held:k", url: Self.url))
        await gate.waitForStarted(1)
        #expect(FileSystem.entry(folder.path + "/.locks/keys")?.type == .regular)
        // The first engine, whose descriptor is of the removed file, sees the key held.
        let refused = await engine.run(JobDescriptor(ProbeKind(), key: "held:k", url: Self.url))
        #expect(refused.status == .duplicate, "\(refused.error ?? "")")
        gate.open()
        let heldStatus = await held.status
        #expect(heldStatus == .succeeded)
        let second = await engine.run(JobDescriptor(ProbeKind(), key: "probe:b", url: Self.url))
        #expect(second.status == .succeeded, "\(second.error ?? "")")
    }

    /// A link planted at `.locks` (an output others may write to) is removed, never followed:
    /// the file of the same name where it pointed keeps its bytes.
    @Test func aLinkPlantedAtTheLockFolderIsNeverFollowed() async throws {
        let folder = TemporaryFolder()
        let out = folder.path + "/out"
        let elsewhere = folder.path + "/elsewhere"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let victim = folder.write("elsewhere/keys", "precious")
        #expect(symlink(elsewhere, out + "/.locks") == 0)

        let result = await (try Self.engine(out)).run(JobDescriptor(ProbeKind(), key: "probe:k", url: Self.url))

        #expect(result.status == .succeeded, "\(result.error ?? "")")
        #expect((try? String(contentsOfFile: victim, encoding: .utf8)) == "precious")
        #expect(FileSystem.entry(out + "/.locks")?.type == .directory)
    }

    /// A link planted at `.locks/keys` is removed, never followed.
    @Test func aLinkPlantedAtTheLockFileIsNeverFollowed() async throws {
        let folder = TemporaryFolder()
        let out = folder.path + "/out"
        try FileManager.default.createDirectory(atPath: out + "/.locks", withIntermediateDirectories: true)
        let victim = folder.write("victim", "precious")
        #expect(symlink(victim, out + "/.locks/keys") == 0)

        let result = await (try Self.engine(out)).run(JobDescriptor(ProbeKind(), key: "probe:k", url: Self.url))

        #expect(result.status == .succeeded, "\(result.error ?? "")")
        #expect((try? String(contentsOfFile: victim, encoding: .utf8)) == "precious")
        #expect(FileSystem.entry(out + "/.locks/keys")?.type == .regular)
    }
}

private func isHeldElsewhere(_ outcome: KeyLockOutcome) -> Bool {
    if case .heldElsewhere = outcome { return true }
    return false
}

private struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A fetcher for jobs that never fetch.
private struct NoFetching: HTTPFetching {
    struct Unused: Error {}
    func fetch(_ request: FetchRequest, into body: any BodySink) async throws -> FetchResponseHead { throw Unused() }
}
