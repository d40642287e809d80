import Foundation
import Glibc
import RunnerTestSupport
import Synchronization
import Testing

@testable import RunnerKit

/// A record that meets a full disk is not lost when the disk frees up before the run ends: the
/// next job's payload may fill the disk between a job's end and its record's write, and is
/// removed a moment later when that job fails.
@Suite(.timeLimit(.minutes(1)))
struct RecordWriterTests {
    final class Problems: RunObserver {
        let said = Mutex<[String]>([])
        func problem(_ message: String) { said.withLock { $0.append(message) } }
    }

    static func result(_ key: String) -> JobResult {
        JobResult(key: key, kind: "entry", status: .failed, error: "no space left", startedAt: Date(), finishedAt: Date())
    }

    /// A record writer whose output is on a tmpfs of 2 MiB (unmount it when done).
    static func writerOnASmallDisk() throws -> (SmallDisk, OutputStore, Problems, RecordWriter) {
        let disk = try SmallDisk(at: FileManager.default.temporaryDirectory.path + "/runner-records-\(UUID().uuidString)")
        let store = try OutputStore(root: disk.path + "/out")
        let problems = Problems()
        return (disk, store, problems, RecordWriter(store: store, runLog: nil, observer: problems))
    }

    /// Fills the disk with one file, returning its path. Close-on-exec: a process another
    /// test starts meanwhile must not keep the file open, or removing it frees no room.
    static func fill(_ disk: SmallDisk) -> String {
        let path = disk.path + "/filler"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        let chunk = [UInt8](repeating: 0x2A, count: 64 * 1024)
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        close(fd)
        return path
    }

    @Test(.enabled(if: SmallDisk.available, "needs root and permission to mount a tmpfs: skipped"))
    func aRecordThatMetAFullDiskIsWrittenOnceThereIsRoom() async throws {
        let (disk, store, problems, writer) = try Self.writerOnASmallDisk()
        defer { disk.unmount() }

        // Given a disk filled by another job's payload when a record is written.
        let filler = Self.fill(disk)
        await writer.write(Self.result("entry:a"), file: "entry_a.json", wait: true)
        #expect(store.readRecord(fileName: "entry_a.json") == nil, "the disk was full")

        // When that payload goes away and the next records come.
        unlink(filler)
        await writer.write(Self.result("entry:b"), file: "entry_b.json", wait: true)

        // Then both records are on disk, in order, and nothing was reported.
        #expect(store.readRecord(fileName: "entry_a.json")?["key"] == .string("entry:a"))
        #expect(store.readRecord(fileName: "entry_b.json")?["key"] == .string("entry:b"))
        #expect(problems.said.withLock { $0 }.isEmpty)
    }

    @Test(.enabled(if: SmallDisk.available, "needs root and permission to mount a tmpfs: skipped"))
    func aRecordStillWithoutRoomAtTheEndIsReportedOnce() async throws {
        let (disk, _, problems, writer) = try Self.writerOnASmallDisk()
        defer { disk.unmount() }

        // Given a disk that stays full.
        _ = Self.fill(disk)
        await writer.write(Self.result("entry:a"), file: "entry_a.json", wait: true)

        // When the run ends.
        await writer.flush()
        await writer.flush()

        // Then the lost record is reported once, naming the key and the reason.
        let said = problems.said.withLock { $0 }
        #expect(said.count == 1, "\(said)")
        #expect(said.first?.contains("entry:a") == true && said.first?.contains("no space left") == true, "\(said)")
    }

    @Test(.enabled(if: SmallDisk.available, "needs root and permission to mount a tmpfs: skipped"))
    func anOlderRecordHeldBackNeverReplacesANewerOne() async throws {
        let (disk, store, _, writer) = try Self.writerOnASmallDisk()
        defer { disk.unmount() }

        // Given a key's record held back by a full disk.
        let filler = Self.fill(disk)
        var first = Self.result("entry:a")
        first.error = "first"
        await writer.write(first, file: "entry_a.json", wait: true)

        // When the disk frees and the same key's next result comes.
        unlink(filler)
        var second = Self.result("entry:a")
        second.error = "second"
        await writer.write(second, file: "entry_a.json", wait: true)
        await writer.flush()

        // Then the newer result is the record.
        #expect(store.readRecord(fileName: "entry_a.json")?["error"] == .string("second"))
    }
}
