package envelope_test

import (
	"errors"
	"fmt"

	"github.com/ontime-go/ontime/envelope"
)

func ExampleEncode() {
	b, err := envelope.Encode("abc", envelope.ContentTypeText, nil, []byte("hello"))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d bytes\n% x\n", len(b), b[:20])
	// Output:
	// 72 bytes
	// 89 42 49 4e 0d 0a 1a 0a 00 01 00 00 00 12 00 00 00 43 00 02
}

func ExampleEncode_replace() {
	// A user header with an earlier key replaces that value in place.
	b, _ := envelope.Encode("timer-1", envelope.ContentTypeJSON, []envelope.Header{
		{Key: "x-tenant", Value: "acme"},
		{Key: "correlation_id", Value: "trace-9"},
		{Key: "x-tenant", Value: "globex"},
	}, []byte(`{"n":1}`))
	m, _ := envelope.DecodeBinary(b)
	for _, h := range m.Headers {
		fmt.Printf("%s: %s\n", h.Key, h.Value)
	}
	// Output:
	// correlation_id: trace-9
	// content-type: application/json
	// x-tenant: globex
}

func ExampleAppendEncode() {
	buf := make([]byte, 0, 256)
	for _, id := range []string{"t1", "t2"} {
		var err error
		buf, err = envelope.AppendEncode(buf[:0], id, "", nil, []byte{0x00, 0xff})
		if err != nil {
			panic(err)
		}
		fmt.Println(len(buf))
	}
	// Output:
	// 42
	// 42
}

func ExampleDecodeBinary() {
	b, _ := envelope.Encode("trace-abc-123", envelope.ContentTypeJSON,
		[]envelope.Header{{Key: "x-tenant", Value: "acme"}}, []byte(`{"order_id":42}`))
	m, err := envelope.DecodeBinary(b)
	if err != nil {
		panic(err)
	}
	tenant, _ := m.Get("x-tenant")
	fmt.Println(m.Format, m.CorrelationID(), m.ContentType(), tenant, m.BodyKind(), string(m.Body))

	_, err = envelope.DecodeBinary(b[:30])
	fmt.Println(errors.Is(err, envelope.ErrMalformed), err)
	// Output:
	// binary-v1 trace-abc-123 application/json acme json {"order_id":42}
	// true envelope: malformed message: data start out of range: data_start 99 in a 30-byte buffer
}

func ExampleDecode() {
	for _, in := range []string{
		`{"b": "2268656c6c6f22", "ct": "application/json"}`,
		`{"data": "hi", "headers": {"content-type": "text/plain"}}`,
		`{"id": 1}`,
	} {
		m, err := envelope.Decode([]byte(in))
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-11s %-5s %q %q\n", m.Format, m.BodyKind(), m.ContentType(), m.Body)
	}
	// Output:
	// legacy-hex  json  "application/json" "\"hello\""
	// legacy-data text  "text/plain" "hi"
	// raw         json  "" "{\"id\": 1}"
}

// Split hands the well-known headers and the user's apart.
func ExampleMessage_Split() {
	b, _ := envelope.Encode("order-7", envelope.ContentTypeJSON, []envelope.Header{{Key: "tenant", Value: "acme"}}, []byte(`{"id":7}`))
	m, _ := envelope.DecodeBinary(b)
	corr, ct, user := m.Split()
	fmt.Println(corr, ct, user)
	// Output:
	// order-7 application/json map[tenant:acme]
}
