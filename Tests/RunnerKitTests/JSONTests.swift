import Foundation
import RunnerKit
import Testing

@Suite struct JSONParserTests {
    @Test func parsesEveryKindOfValueAndKeepsMemberOrder() throws {
        let value = try JSONParser.parse(#"{"z": 1, "a": [true, false, null, -1.5e2, "x\u00e9\n"], "m": {}}"#)
        #expect(value.objectValue?.map(\.key) == ["z", "a", "m"])
        #expect(value["a"] == .array([.bool(true), .bool(false), .null, .number(-150), .string("xé\n")]))
        #expect(JSONWriter.string(value) == #"{"z":1,"a":[true,false,null,-150,"xé\n"],"m":{}}"#)
    }

    @Test func surrogatePairsDecode() throws {
        #expect(try JSONParser.parse(#""\ud83d\ude00""#) == .string("😀"))
    }

    @Test(arguments: [
        ("", "the document is empty", 1, 1),
        ("{\"a\": 1,}", "expected a member name in double quotes", 1, 9),
        ("[1, 2", "expected ',' or ']' in an array", 1, 6),
        ("{\n  \"a\": tru\n}", "unexpected character 't'", 2, 8),
        ("01", "a number with a leading zero", 1, 2),
        ("{\"a\":1} x", "unexpected text after the JSON value", 1, 9),
        ("{\"a\":1,\"a\":2}", "duplicate member \"a\"", 1, 13),
        ("\"\\x\"", "an invalid escape \\x in a string", 1, 3),
    ])
    func errorsSayWhatAndWhere(input: String, message: String, line: Int, column: Int) {
        #expect(throws: JSONParser.Error(message: message, line: line, column: column)) { try JSONParser.parse(input) }
    }

    @Test func deepNestingIsRefusedNotACrash() {
        let deep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(deep) }
    }

    @Test func invalidUTF8InsideAStringIsRefused() {
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse([0x22, 0xFF, 0x22]) }
        // {"a":"\xC3"}: the error points just after the closing quote, with or without an escape before it
        let message = "a string is not valid UTF-8"
        #expect(throws: JSONParser.Error(message: message, line: 1, column: 9)) {
            try JSONParser.parse([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xC3, 0x22, 0x7D])
        }
        #expect(throws: JSONParser.Error(message: message, line: 1, column: 11)) {
            try JSONParser.parse([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0x5C, 0x6E, 0xC3, 0x22, 0x7D])
        }
    }

    @Test func stringsOfEveryScriptDecode() throws {
        #expect(try JSONParser.parse(#"["plain", "é日本😀", "é\n日", "", "\u0041"]"#)
            == .array([.string("plain"), .string("é日本😀"), .string("é\n日"), .string(""), .string("A")]))
    }

    @Test func aSliceParsesOnItsOwn() throws {
        let bytes = Array(#"xx{"a": "b"}yy{"a": 1,}"#.utf8)
        #expect(try JSONParser.parse(bytes[2..<12]) == .object([("a", .string("b"))]))
        #expect(throws: JSONParser.Error(message: "expected a member name in double quotes", line: 1, column: 9)) {
            try JSONParser.parse(bytes[14...])
        }
    }
}

@Suite struct JSONWriterTests {
    @Test func escapesOnlyWhatJSONRequiresAndCopiesTheRest() {
        let text = "plain \"quoted\" back\\slash\nnew\ttab\r\u{01}é😀"
        let written = JSONWriter.string(.string(text))
        #expect(written == #""plain \"quoted\" back\\slash\nnew\ttab\r\u0001é😀""#)
        #expect(JSONWriter.string(.string("")) == #""""#)
        #expect(JSONWriter.string(.string("\"")) == #""\"""#)
    }

    @Test func writtenStringsParseBackToThemselves() throws {
        for text in ["", "a", "\u{1F}", "x\"y\\z", String(repeating: "ab\n", count: 100), "ünïcödé \u{7F}"] {
            #expect(try JSONParser.parse(JSONWriter.data(.object([(text, .string(text))]))) == .object([(text, .string(text))]))
        }
    }
}

@Suite struct TimestampTests {
    @Test func iso8601HasMillisecondsAndUTC() {
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 1_795_000_000.041)) == "2026-11-18T11:06:40.041Z")
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: 951_782_399.999)) == "2000-02-28T23:59:59.999Z")
        #expect(Timestamp.iso8601(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
    }
}
