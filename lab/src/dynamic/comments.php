<?php
// The dynamic-routes application in PHP (the seeds' Figure 3), through
// php-fpm behind Stoa and mod_php behind Apache: a persistent PDO
// connection per PHP process (pg_pconnect's successor).
//   GET ?t=b1|b2|b3[&db=pg]: SELECT * FROM that table (else `comments`)
//   POST name, email, comments: INSERT INTO comments; "All done OK"
// LAB_SQLITE, LAB_PGHOST and LAB_PGPORT come as server variables (FastCGI params,
// Apache SetEnv).
$pg = ($_GET['db'] ?? '') === 'pg';
$opts = [PDO::ATTR_PERSISTENT => true, PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION];
if ($pg) {
    $db = new PDO('pgsql:host=' . $_SERVER['LAB_PGHOST'] . ';port=' . $_SERVER['LAB_PGPORT'] . ';dbname=comments', 'lab', null, $opts);
} else {
    $db = new PDO('sqlite:' . $_SERVER['LAB_SQLITE'], null, null, $opts);
    $db->setAttribute(PDO::ATTR_TIMEOUT, 5);
}
if ($_SERVER['REQUEST_METHOD'] === 'POST') {
    $st = $db->prepare('INSERT INTO comments VALUES (?, ?, ?)');
    $st->execute([$_POST['name'] ?? '', $_POST['email'] ?? '', $_POST['comments'] ?? '']);
    echo "All done OK\n";
    return;
}
$t = $_GET['t'] ?? '';
$table = ($t === 'b1' || $t === 'b2' || $t === 'b3') ? $t : 'comments';
$out = "<html><head><title>comments</title></head><body>\n<table>\n"
     . "<tr><th>name</th><th>email</th><th>comments</th></tr>\n";
foreach ($db->query("SELECT * FROM $table", PDO::FETCH_NUM) as $r) {
    $out .= '<tr><td>' . htmlspecialchars($r[0], ENT_COMPAT) . '</td><td>'
          . htmlspecialchars($r[1], ENT_COMPAT) . '</td><td>'
          . htmlspecialchars($r[2], ENT_COMPAT) . "</td></tr>\n";
}
$out .= "</table>\n</body></html>\n";
header('Content-Length: ' . strlen($out));
echo $out;
