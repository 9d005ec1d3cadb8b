<?php
// header("Location: ...") makes php-cgi send Status: 302 with the Location.
header("Location: /index.php?name=redirected");
