import FixtureServer
import Foundation
import RunnerTestSupport
import Glibc
import RunnerKit
import Synchronization
import Testing

/// Children of one parent run through a window: a list of 300 000 elements does not start
/// 300 000 jobs at once.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)))
struct FanOutMemoryTests {
    @Test func aListOf300000ImagesRunsThroughAWindowInBoundedMemory() async throws {
        let w = try Workspace()
        // Every image hangs, so the children in flight stay in flight: what is running at once
        // is exactly the window, and the peak is that of the list plus the window.
        w.write("list.json", #"{"kind": "image-list", "key": "list:big", "url": "\#(w.base)/list/300000?image=hang%3D1", "timeout": 120}"#)
        let process = try ChildProcess(
            RunnerBinary.path, ["run", "list.json", "--out", w.out, "--concurrency", "8"], directory: w.root, stdout: .null, stderr: .null)
        defer { process.terminate() }
        let peak = Mutex(0)
        let watching = Task {
            let value = await PeakMemory.watch(process)
            peak.withLock { $0 = value }
        }
        // Wait until the children are running (the window is full of hanging requests), then a
        // little longer, so a runner that started every child would have done so by now.
        let limit = ContinuousClock.now.advanced(by: .seconds(90))
        while w.server.requestCount(path: "/images/png.png") < 8 && ContinuousClock.now < limit && process.isRunning {
            try await Task.sleep(for: .milliseconds(50))
        }
        let started = w.server.requestCount(path: "/images/png.png")
        #expect(started >= 8, "the children started")
        try await Task.sleep(for: .seconds(2))
        let inFlight = w.server.requestCount(path: "/images/png.png")
        #expect(inFlight <= 64, "only a window of children runs at once: \(inFlight) requests")
        kill(process.processIdentifier, SIGTERM)
        await watching.value
        let bytes = peak.withLock { $0 }
        print("fan-out peak: \(bytes >> 20) MB, \(inFlight) requests in flight")
        #expect(bytes > 0)
        #expect(bytes < 300 << 20, "peak \(bytes >> 20) MB")
        #expect(process.terminationStatus == 143)
        let record = try w.record("list:big")
        #expect(record["status"] == .string("cancelled"), "\(record)")
        #expect(record["details"]?["elements"]?.intValue == 300_000)
    }
}
