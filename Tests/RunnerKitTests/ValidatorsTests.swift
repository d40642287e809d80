import RunnerKit
import Testing

@Suite struct ValidatorsTests {
    @Test func validatorsWithControlCharactersAreDroppedNotSentBack() {
        let split = Validators(headers: ["etag": "\"a\"\r\nX-Injected: 1", "last-modified": "Mon, 23 Nov 2026 10:00:00 GMT"])
        #expect(split?.etag == nil)
        #expect(split?.lastModified == "Mon, 23 Nov 2026 10:00:00 GMT")
        #expect(split?.conditionalHeaders.map(\.name) == ["If-Modified-Since"])
        #expect(Validators(headers: ["etag": "\"a\u{0}\""]) == nil)
        #expect(Validators(headers: ["etag": "\"a\u{7F}\""]) == nil)
        #expect(Validators(headers: ["etag": String(repeating: "a", count: 9000)]) == nil)
        let record = JSONValue.object([("validators", .object([("etag", .string("x\ny")), ("lastModified", .null)]))])
        #expect(Validators(record: record) == nil)
        #expect(Validators(headers: ["etag": "W/\"ok-1\""])?.conditionalHeaders.first?.value == "W/\"ok-1\"")
    }
}
