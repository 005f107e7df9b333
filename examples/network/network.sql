-- Network monitoring over a stream of TCP flow records, one record per packet
-- seen by a tap. Two queries, one in each form; both partition by source
-- address, so each source is matched as if it were alone on the stream.
CREATE STREAM flows (
  time      TIMESTAMP,                                  -- capture time, ticks
  src       UINT32,                                     -- source IPv4 address
  dst_port  UINT16,
  flags     ENUM('SYN', 'SYNACK', 'ACK', 'FIN', 'RST'),
  bytes     UINT32                                      -- packet length
);

/* synflood (compact form): three or more bare SYNs in a row from one source,
   with nothing else from that source in between. A SYN that carries data
   (bytes >= 100) is not a bare SYN and breaks the run. SKIP PAST LAST ROW (the
   default, spelled out here) reports the third SYN, forgets the run, and
   starts counting again: a long run reports at every third SYN. */
NAME synflood
PARTITION BY src
AFTER MATCH SKIP PAST LAST ROW
PATTERN ( SYN{3,} )
DEFINE
  SYN AS flags = 'SYN' AND bytes < 100;

-- halfopen (SQL:2016 form): a SYN, then any records but an ACK, then a RST:
-- the source gave up on a handshake it never completed. With AFTER MATCH
-- CONTINUE every RST that closes such a run is reported, including a second
-- RST whose SYN already ended a match.
SELECT * FROM flows MATCH_RECOGNIZE (
  PARTITION BY src
  ORDER BY time
  ONE ROW PER MATCH
  AFTER MATCH CONTINUE
  PATTERN ( S NOACK* R )
  DEFINE
    S     AS flags = 'SYN',
    NOACK AS flags <> 'ACK',
    R     AS flags = 'RST'
) AS halfopen;
