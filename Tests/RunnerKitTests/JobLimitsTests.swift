import Foundation
import RunnerKit
import Testing

/// The operator's caps on what a job may ask (`--max-bytes`, `--max-timeout`, `--max-retries`).
@Suite struct JobLimitsTests {
    let folder = TemporaryFolder()
    let registry = probeRegistry()
    let limits = JobLimits(maxBytes: 1_000_000, maxTimeout: .seconds(5), maxRetries: 2)

    func errors(_ text: String, limits: JobLimits) -> [String] {
        let path = folder.write("f.json", text)
        return JobFileReader.validate(path: path, registry: registry, limits: limits).errors.map {
            $0.description.replacingOccurrences(of: folder.path + "/", with: "")
        }
    }

    @Test(arguments: [
        (#"{"kind": "probe", "url": "http://h/", "maxBytes": 1000001}"#,
         "f.json: field 'maxBytes' asks for 1000001 bytes, more than this runner allows (1000000, set by --max-bytes)"),
        (#"{"kind": "probe", "url": "http://h/", "timeout": 5.5}"#,
         "f.json: field 'timeout' asks for 5.5 seconds, more than this runner allows (5, set by --max-timeout)"),
        (#"{"kind": "probe", "url": "http://h/", "retries": 3}"#,
         "f.json: field 'retries' asks for 3 retries, more than this runner allows (2, set by --max-retries)"),
        (#"{"defaults": {"retries": 9}, "jobs": [{"kind": "probe", "url": "http://h/"}]}"#,
         "f.json: job 1: field 'retries' asks for 9 retries, more than this runner allows (2, set by --max-retries)"),
    ])
    func aJobAskingMoreThanACapIsInvalidNamingFieldAndCap(text: String, expected: String) {
        #expect(errors(text, limits: limits) == [expected])
        #expect(errors(text, limits: .none).isEmpty)
    }

    /// One limit on keys, wherever a job is read: 1 KiB of UTF-8 passes, a byte more does not.
    @Test func aKeyIsAtMostOneKiBOfUTF8() {
        let most = String(repeating: "é", count: 512)  // 1024 bytes
        #expect(errors(#"{"kind": "probe", "url": "http://h/", "key": "\#(most)"}"#, limits: .none).isEmpty)
        #expect(errors(#"{"kind": "probe", "url": "http://h/", "key": "\#(most)k"}"#, limits: .producer)
            == ["f.json: field 'key' is 1025 bytes long; a key is at most 1024 bytes of UTF-8"])
    }

    /// What the page, the logs and the queue show is bounded: a URL at most 8 KiB (checked when
    /// the job is read), an error at most 2 KiB (cut where it is made).
    @Test func urlsAndErrorsAreBounded() {
        let path = "/" + String(repeating: "p", count: 8192 - 9)  // "http://h" and the path: 8192 bytes
        #expect(errors(#"{"kind": "probe", "url": "http://h\#(path)"}"#, limits: .none).isEmpty)
        #expect(errors(#"{"kind": "probe", "url": "http://h\#(path)p"}"#, limits: .none)
            == ["f.json: field 'url' is 8193 bytes long; a URL is at most 8192 bytes"])
        let long = String(repeating: "é", count: 3000)
        var result = JobResult(key: "k", kind: "probe", status: .failed, error: long, startedAt: Date(), finishedAt: Date())
        #expect(result.error!.utf8.count <= JobResult.maxErrorBytes)
        #expect(result.error!.hasPrefix("ééé") && result.error!.hasSuffix("more bytes)"), "\(result.error!.suffix(40))")
        result.error = "short"
        #expect(result.error == "short")
        result.error = long
        #expect(result.error!.utf8.count <= JobResult.maxErrorBytes, "set later, cut too")
    }

    /// A producer's job may not refer to the runner's environment or files; the operator's may.
    @Test func secretReferencesAreTheOperatorsOnly() {
        let job = #"{"kind": "probe", "url": "http://h/", "headers": {"a": "x {env:HOME}", "b": "plain"}}"#
        #expect(errors(job, limits: .none).isEmpty)
        #expect(errors(job, limits: .producer) == [
            "f.json: field 'headers' a: {env:HOME} is not expanded in a job a watcher runs (only under 'runner run'); put the header in the watcher's --config, under the host it is for",
        ])
        #expect(errors(#"{"kind": "probe", "url": "http://h/", "headers": {"b": "{braces} are text"}}"#, limits: .producer).isEmpty)
    }

    @Test func aJobWithinTheCapsKeepsWhatItAskedAndAnUnsetFieldGetsTheLowerOfDefaultAndCap() throws {
        let path = folder.write("ok.json", #"[{"kind": "probe", "url": "http://h/1", "maxBytes": 1000000, "timeout": 5, "retries": 2}, {"kind": "probe", "url": "http://h/2"}]"#)
        let jobs = try IteratorSequence(JobFileReader(path: path, registry: registry, limits: limits)).map { try $0.get() }
        #expect(jobs[0].maxBytes == 1_000_000 && jobs[0].timeout == .seconds(5) && jobs[0].retries == 2)
        #expect(jobs[1].maxBytes == 1_000_000, "the default of 64 MiB is above the cap")
        #expect(jobs[1].timeout == .seconds(2), "the default of 2 s is below the cap")
        #expect(jobs[1].retries == 0)
    }

    @Test func aJobOfManyMembersIsReadInLinearTime() {
        // 100 000 unknown fields: refused for the first, without a scan per field.
        var text = #"{"kind": "probe", "url": "http://h/""#
        for i in 0..<100_000 { text += #", "f\#(i)": 1"# }
        text += "}"
        let start = ContinuousClock.now
        let found = errors(text, limits: .none)
        #expect(found == ["f.json: field 'f0' is not a field of kind 'probe'"])
        #expect(start.duration(to: .now) < .seconds(5))
    }
}
